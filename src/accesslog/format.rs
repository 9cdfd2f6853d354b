//! Formatting one access log line (on the writer thread).

use super::{AccessFormat, Record};
use http::Version;
use std::fmt::Write;
use std::time::{SystemTime, UNIX_EPOCH};

const MONTHS: [&str; 12] = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];

pub(super) fn line(out: &mut String, r: &Record, format: AccessFormat) {
    match format {
        AccessFormat::Combined => combined(out, r),
        AccessFormat::Json => json(out, r),
    }
}

/// `127.0.0.1 - - [10/Oct/2000:13:55:36 +0000] "GET /a?b HTTP/1.1" 200 2326 "ref" "agent"`
fn combined(out: &mut String, r: &Record) {
    let t = Civil::of(r.when);
    let _ = write!(
        out,
        "{} - - [{:02}/{}/{:04}:{:02}:{:02}:{:02} +0000] \"",
        host(&r.remote),
        t.day,
        MONTHS[t.month as usize - 1],
        t.year,
        t.hour,
        t.minute,
        t.second
    );
    clf_escape(out, r.method.as_str().as_bytes());
    out.push(' ');
    clf_escape(out, r.target.as_bytes());
    let _ = write!(out, " {}\" {} ", version(r.version), r.status);
    if r.bytes == 0 {
        out.push('-');
    } else {
        let _ = write!(out, "{}", r.bytes);
    }
    for v in [&r.referer, &r.user_agent] {
        out.push_str(" \"");
        match v {
            Some(v) => clf_escape(out, v.as_bytes()),
            None => out.push('-'),
        }
        out.push('"');
    }
}

/// `{"time":"2000-10-10T13:55:36.123Z","remote":"127.0.0.1:5000",...}`
fn json(out: &mut String, r: &Record) {
    let t = Civil::of(r.when);
    let _ = write!(
        out,
        "{{\"time\":\"{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z\",\"remote\":",
        t.year, t.month, t.day, t.hour, t.minute, t.second, t.millis
    );
    json_str(out, r.remote.as_bytes());
    out.push_str(",\"method\":");
    json_str(out, r.method.as_str().as_bytes());
    out.push_str(",\"target\":");
    json_str(out, r.target.as_bytes());
    let _ = write!(
        out,
        ",\"version\":\"{}\",\"status\":{},\"bytes\":{},\"duration_ms\":{}.{:03},\"tls\":{}",
        version(r.version),
        r.status,
        r.bytes,
        r.took.as_micros() / 1000,
        r.took.as_micros() % 1000,
        r.tls
    );
    for (name, v) in [("referer", &r.referer), ("user_agent", &r.user_agent)] {
        let _ = write!(out, ",\"{name}\":");
        match v {
            Some(v) => json_str(out, v.as_bytes()),
            None => out.push_str("null"),
        }
    }
    out.push('}');
}

fn version(v: Version) -> &'static str {
    match v {
        Version::HTTP_09 => "HTTP/0.9",
        Version::HTTP_10 => "HTTP/1.0",
        Version::HTTP_2 => "HTTP/2.0",
        Version::HTTP_3 => "HTTP/3.0",
        _ => "HTTP/1.1",
    }
}

/// The address without its port ("[::1]:80" → "::1").
fn host(remote: &str) -> &str {
    let addr = remote.rsplit_once(':').map_or(remote, |(h, _)| h);
    addr.trim_start_matches('[').trim_end_matches(']')
}

/// As Apache does: quotes and backslashes escaped, anything not printable ASCII as \xHH,
/// so a line can never be split or forged by what a client sends.
fn clf_escape(out: &mut String, bytes: &[u8]) {
    for &b in bytes {
        match b {
            b'"' => out.push_str("\\\""),
            b'\\' => out.push_str("\\\\"),
            0x20..=0x7e => out.push(b as char),
            _ => {
                let _ = write!(out, "\\x{b:02x}");
            }
        }
    }
}

/// A JSON string; bytes that are not UTF-8 become U+FFFD.
fn json_str(out: &mut String, bytes: &[u8]) {
    out.push('"');
    for c in String::from_utf8_lossy(bytes).chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 || c == '\u{7f}' || c == '\u{2028}' || c == '\u{2029}' => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// A UTC calendar time.
struct Civil {
    year: i64,
    month: u32,
    day: u32,
    hour: u32,
    minute: u32,
    second: u32,
    millis: u32,
}

impl Civil {
    fn of(t: SystemTime) -> Civil {
        let d = t.duration_since(UNIX_EPOCH).unwrap_or_default();
        let secs = d.as_secs() as i64;
        let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400) as u32);
        // Howard Hinnant's days-to-civil algorithm (proleptic Gregorian calendar).
        let z = days + 719_468;
        let era = z.div_euclid(146_097);
        let doe = z - era * 146_097;
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
        let mp = (5 * doy + 2) / 153;
        let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
        let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
        let year = yoe + era * 400 + i64::from(month <= 2);
        Civil { year, month, day, hour: rem / 3600, minute: rem / 60 % 60, second: rem % 60, millis: d.subsec_millis() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::{HeaderValue, Method};
    use std::time::Duration;

    fn record() -> Record {
        Record {
            // 2000-10-10T13:55:36.250Z
            when: UNIX_EPOCH + Duration::from_millis(971_186_136_250),
            remote: "[::1]:5000".into(),
            method: Method::GET,
            target: "/a b\"?q=1".into(),
            version: Version::HTTP_11,
            status: 200,
            bytes: 2326,
            took: Duration::from_micros(1_234),
            referer: None,
            user_agent: Some(HeaderValue::from_bytes(b"curl/8 \"x\"\xff").unwrap()),
            tls: true,
        }
    }

    #[test]
    fn combined_lines_escape_what_clients_send() {
        let mut s = String::new();
        line(&mut s, &record(), AccessFormat::Combined);
        assert_eq!(s, r#"::1 - - [10/Oct/2000:13:55:36 +0000] "GET /a b\"?q=1 HTTP/1.1" 200 2326 "-" "curl/8 \"x\"\xff""#);
    }

    #[test]
    fn json_lines_are_one_object_each() {
        let mut s = String::new();
        line(&mut s, &record(), AccessFormat::Json);
        let expected = r#"{"time":"2000-10-10T13:55:36.250Z","remote":"[::1]:5000","method":"GET","target":"/a b\"?q=1","version":"HTTP/1.1","status":200,"bytes":2326,"duration_ms":1.234,"tls":true,"referer":null,"user_agent":"curl/8 \"x\""#;
        assert_eq!(s, format!("{expected}\u{fffd}\"}}"));
    }

    #[test]
    fn calendar_dates_are_right_across_leap_years() {
        let at = |secs: u64| {
            let c = Civil::of(UNIX_EPOCH + Duration::from_secs(secs));
            (c.year, c.month, c.day, c.hour, c.minute, c.second)
        };
        assert_eq!(at(0), (1970, 1, 1, 0, 0, 0));
        assert_eq!(at(951_782_400), (2000, 2, 29, 0, 0, 0));
        assert_eq!(at(1_709_251_199), (2024, 2, 29, 23, 59, 59));
        assert_eq!(at(4_102_444_800), (2100, 1, 1, 0, 0, 0));
    }
}
