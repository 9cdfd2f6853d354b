//! The access log and the metrics through real requests.

mod common;

use common::*;
use ember::log::{Level, Logger};
use ember::{AccessFormat, AccessLogConfig, AccessTarget, Dispatch, ErrorKind, Request, Server};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

fn tempdir(tag: &str) -> PathBuf {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
    let d = std::env::temp_dir().join(format!("ember-observe-{tag}-{}-{nanos}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Waits until the file has `n` lines (the writer thread writes them shortly after).
fn lines(path: &PathBuf, n: usize) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        let lines: Vec<String> = text.lines().map(str::to_owned).collect();
        if lines.len() >= n || Instant::now() > deadline {
            return lines;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn combined_lines_go_to_a_file_and_a_reopen_starts_a_new_one() {
    let dir = tempdir("combined");
    let path = dir.join("access.log");
    let (s, port) = server(Dispatch::Pool, |s| {
        s.set_access_log(Some(AccessLogConfig { format: AccessFormat::Combined, target: AccessTarget::File(path.clone()) })).unwrap();
    });
    let req = b"GET /?x=1 HTTP/1.1\r\nHost: t\r\nUser-Agent: probe \"1\"\r\nReferer: http://r/\r\nConnection: close\r\n\r\n";
    assert!(exchange(port, req, Duration::from_secs(5)).ends_with("hello"));
    assert!(get(port, "/missing").starts_with("HTTP/1.1 404"));
    let got = lines(&path, 2);
    assert_eq!(got.len(), 2, "{got:?}");
    let re_ok = got[0].starts_with("127.0.0.1 - - [") && got[0].ends_with(r#" +0000] "GET /?x=1 HTTP/1.1" 200 5 "http://r/" "probe \"1\"""#);
    assert!(re_ok, "{}", got[0]);
    assert!(got[1].ends_with(r#""GET /missing HTTP/1.1" 404 14 "-" "-""#), "{}", got[1]);

    // logrotate: move the file away, reopen, go on.
    let rotated = dir.join("access.log.1");
    std::fs::rename(&path, &rotated).unwrap();
    assert!(get(port, "/").ends_with("hello"));
    s.reopen_access_log().unwrap();
    assert!(get(port, "/").ends_with("hello"));
    assert_eq!(lines(&rotated, 3).len(), 3, "the line before the reopen went to the old file");
    assert_eq!(lines(&path, 1).len(), 1, "the line after it to the new one");
    s.stop(Duration::from_secs(1)).unwrap();
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn json_lines_go_to_the_log_callback_whatever_its_level() {
    let seen: Arc<Mutex<Vec<(Level, String)>>> = Arc::default();
    let sink = seen.clone();
    let (s, port) = server(Dispatch::Inline, |s| {
        s.set_logger(Logger::new(Some(Arc::new(move |l, m: &str| sink.lock().unwrap().push((l, m.to_owned())))), Level::Error)).unwrap();
        s.set_access_log(Some(AccessLogConfig { format: AccessFormat::Json, target: AccessTarget::Log })).unwrap();
    });
    let req = b"POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 2\r\nConnection: close\r\n\r\nhi";
    assert!(exchange(port, req, Duration::from_secs(5)).starts_with("HTTP/1.1 405"));
    // Every line is out once stop returns.
    s.stop(Duration::from_secs(1)).unwrap();
    let seen = seen.lock().unwrap();
    let access: Vec<_> = seen.iter().filter(|(l, _)| *l == Level::Access).collect();
    assert_eq!(access.len(), 1, "{seen:?}");
    let line = &access[0].1;
    assert!(line.starts_with(r#"{"time":""#), "{line}");
    assert!(line.contains(r#","remote":"127.0.0.1:"#), "{line}");
    assert!(line.contains(r#","method":"POST","target":"/","version":"HTTP/1.1","status":405,"bytes":23,"duration_ms":"#), "{line}");
    assert!(line.ends_with(r#","tls":false,"referer":null,"user_agent":null}"#), "{line}");
    assert!(!seen.iter().any(|(l, _)| *l == Level::Info), "the callback's own level still holds for other lines");
}

#[test]
fn an_access_log_that_cannot_be_opened_fails_start_and_the_server_can_be_fixed() {
    let dir = tempdir("unopenable");
    let bad = dir.join("no-such-dir").join("access.log");
    let s = Arc::new(Server::new());
    s.listen("127.0.0.1:0").unwrap();
    s.set_access_log(Some(AccessLogConfig { format: AccessFormat::Combined, target: AccessTarget::File(bad.clone()) })).unwrap();
    let e = s.start().unwrap_err();
    assert_eq!(e.kind, ErrorKind::InvalidArg);
    assert!(e.message.contains(&bad.display().to_string()), "{}", e.message);
    s.set_access_log(Some(AccessLogConfig { format: AccessFormat::Combined, target: AccessTarget::File(dir.join("ok.log")) })).unwrap();
    s.start().unwrap();
    assert_eq!(s.metrics_text().unwrap_err().kind, ErrorKind::State, "metrics are off");
    s.stop(Duration::from_secs(1)).unwrap();
    let _ = std::fs::remove_dir_all(dir);
}

fn value(text: &str, series: &str) -> u64 {
    let line = text.lines().find(|l| l.starts_with(series) && l[series.len()..].starts_with(' ')).unwrap_or_else(|| panic!("no {series} in\n{text}"));
    line[series.len() + 1..].parse().unwrap()
}

#[test]
fn the_metrics_path_answers_prometheus_text() {
    let (s, port) = server(Dispatch::Pool, |s| {
        s.set_metrics(Some("/metrics")).unwrap();
        s.route(Some(http::Method::GET), "/slow", Arc::new(|r: &Request| {
            let r = r.clone();
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(30));
                r.respond(201, b"", "late").unwrap();
            });
        }))
        .unwrap();
    });
    for _ in 0..3 {
        assert!(get(port, "/").ends_with("hello"));
    }
    assert!(get(port, "/slow").starts_with("HTTP/1.1 201"));
    assert!(get(port, "/nope").starts_with("HTTP/1.1 404"));
    let resp = get(port, "/metrics");
    assert!(resp.starts_with("HTTP/1.1 200"), "{resp}");
    assert!(resp.contains("content-type: text/plain; version=0.0.4; charset=utf-8\r\n"), "{resp}");
    let text = resp.split_once("\r\n\r\n").unwrap().1;
    assert_eq!(value(text, "ember_responses_total{code=\"200\"}"), 3);
    assert_eq!(value(text, "ember_responses_total{code=\"201\"}"), 1);
    assert_eq!(value(text, "ember_responses_total{code=\"404\"}"), 1);
    assert_eq!(value(text, "ember_requests_total"), 6, "the metrics request itself counts");
    assert_eq!(value(text, "ember_request_duration_seconds_count"), 5, "five answers have ended");
    assert_eq!(value(text, "ember_request_duration_seconds_bucket{le=\"+Inf\"}"), 5);
    assert!(value(text, "ember_request_duration_seconds_bucket{le=\"0.025\"}") <= 4, "the slow answer took 30 ms or more");
    assert!(text.contains("# TYPE ember_request_duration_seconds histogram\n"));
    assert!(text.contains("# TYPE ember_connections_active gauge\n"));

    let head = exchange(port, b"HEAD /metrics HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n", Duration::from_secs(5));
    assert!(head.starts_with("HTTP/1.1 200") && head.ends_with("\r\n\r\n"), "{head}");
    let post = exchange(port, b"POST /metrics HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", Duration::from_secs(5));
    assert!(post.starts_with("HTTP/1.1 405") && post.contains("allow: GET, HEAD\r\n"), "{post}");
    let via_api = s.metrics_text().unwrap();
    assert!(value(&via_api, "ember_responses_total{code=\"405\"}") == 1, "{via_api}");
}

#[test]
fn metrics_paths_are_checked_and_off_means_a_plain_404() {
    let s = Server::new();
    for bad in ["metrics", "/m?x", "/m etrics", "/m#"] {
        assert_eq!(s.set_metrics(Some(bad)).unwrap_err().kind, ErrorKind::InvalidArg, "{bad:?}");
    }
    let (_s, port) = server(Dispatch::Inline, |_| {});
    assert!(get(port, "/metrics").starts_with("HTTP/1.1 404"));
}
