//! CPU per MB and ratio of the engine's on-the-fly codings on typical ~100 KB answers (a
//! JSON list and an HTML page, generated: the same bytes on every run), plus zstd at other
//! levels, which is how its level was chosen (README, compression).
//!   cargo bench --bench compress --features brotli,zstd [-- FILE...]
//! Files named after `--` are measured too (real pages and API answers beside the
//! generated ones).
//! CPU is the thread's own (CLOCK_THREAD_CPUTIME_ID): steadier than wall time on a shared
//! machine. Decoding is timed too: what the client pays.

use ember::compress::{compress_now, zstd_level, Coding};
use std::io::Read;

/// A deterministic word source (xorshift), so every run compresses the same body.
struct Words(u64);
const VOCAB: &[&str] = &[
    "alpha", "order", "customer", "shipped", "pending", "invoice", "street", "London", "Paris", "widget", "gadget",
    "premium", "standard", "delivery", "returned", "account", "balance", "north", "south", "review", "quality", "blue",
    "green", "large", "small", "service", "support", "ticket", "closed", "open", "priority", "express",
];
impl Words {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn word(&mut self) -> &'static str {
        VOCAB[(self.next() % VOCAB.len() as u64) as usize]
    }
}

fn json_body(target: usize) -> Vec<u8> {
    let mut w = Words(0x9E37_79B9_7F4A_7C15);
    let mut s = String::from("{\"items\":[");
    let mut i = 0u64;
    while s.len() < target {
        let n = w.next();
        s += &format!(
            "{{\"id\":{},\"name\":\"{} {}\",\"email\":\"{}.{}@example.com\",\"created\":\"2026-{:02}-{:02}T{:02}:{:02}:{:02}Z\",\"total\":{}.{:02},\"active\":{},\"tags\":[\"{}\",\"{}\"],\"address\":{{\"street\":\"{} {}\",\"city\":\"{}\",\"zip\":\"{:05}\"}}}},",
            100_000 + i, w.word(), w.word(), w.word(), n % 9973, 1 + n % 12, 1 + n % 28, n % 24, n % 60, (n >> 8) % 60,
            n % 5000, n % 100, n % 2 == 0, w.word(), w.word(), n % 999, w.word(), w.word(), n % 100_000,
        );
        i += 1;
    }
    s.pop();
    s += "]}";
    s.into_bytes()
}

fn html_body(target: usize) -> Vec<u8> {
    let mut w = Words(0x2545_F491_4F6C_DD1D);
    let mut s = String::from("<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>Orders</title><link rel=\"stylesheet\" href=\"/static/site.css\"></head><body><nav class=\"top\"><a href=\"/\">Home</a> <a href=\"/orders\">Orders</a></nav><main><table class=\"orders\"><thead><tr><th>Order</th><th>Customer</th><th>Status</th><th>Total</th></tr></thead><tbody>\n");
    let mut i = 0u64;
    while s.len() < target {
        let n = w.next();
        s += &format!(
            "<tr class=\"row {}\"><td><a href=\"/orders/{}\">#{}</a></td><td>{} {}</td><td><span class=\"badge badge-{}\">{}</span></td><td class=\"num\">{}.{:02}</td></tr>\n",
            if i % 2 == 0 { "even" } else { "odd" }, 40_000 + i, 40_000 + i, w.word(), w.word(), w.word(), w.word(), n % 5000, n % 100,
        );
        if i % 25 == 24 {
            s += &format!("<tr><td colspan=\"4\"><p class=\"note\">{} {} {} {} {} {}.</p></td></tr>\n", w.word(), w.word(), w.word(), w.word(), w.word(), w.word());
        }
        i += 1;
    }
    s += "</tbody></table></main><footer>Ember</footer></body></html>";
    s.into_bytes()
}

fn thread_cpu() -> f64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

/// CPU milliseconds per MB of input: the best of 5 rounds, each long enough (~0.2 s) to
/// average over many calls.
fn ms_per_mb(body: &[u8], mut f: impl FnMut(&[u8]) -> usize) -> f64 {
    let mut reps = 1usize;
    loop {
        let t = thread_cpu();
        for _ in 0..reps {
            std::hint::black_box(f(body));
        }
        if thread_cpu() - t > 0.05 {
            break;
        }
        reps *= 2;
    }
    let reps = reps * 4;
    let mut best = f64::MAX;
    for _ in 0..5 {
        let t = thread_cpu();
        for _ in 0..reps {
            std::hint::black_box(f(body));
        }
        best = best.min((thread_cpu() - t) / reps as f64);
    }
    best * 1e3 / (body.len() as f64 / 1e6)
}

fn decode(coding: Coding, data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    match coding {
        Coding::Gzip => flate2::read::GzDecoder::new(data).read_to_end(&mut out).map(|_| ()),
        Coding::Brotli => brotli::Decompressor::new(data, 4096).read_to_end(&mut out).map(|_| ()),
        Coding::Zstd => zstd::stream::read::Decoder::new(data).and_then(|mut d| d.read_to_end(&mut out)).map(|_| ()),
    }
    .expect("decodes");
    out
}

fn main() {
    println!("| body | coding | ratio (in ÷ out) | compress CPU ms/MB | decode CPU ms/MB |");
    println!("|---|---|---|---|---|");
    let mut bodies = vec![("JSON".to_owned(), json_body(100_000)), ("HTML".to_owned(), html_body(100_000))];
    for path in std::env::args().skip(1).filter(|a| !a.starts_with('-')) {
        let name = path.rsplit('/').next().unwrap_or(&path).to_owned();
        bodies.push((name, std::fs::read(&path).expect("a readable file")));
    }
    for (name, body) in bodies {
        let label = format!("{name} {} B", body.len());
        let level_used = zstd_level();
        let engine_zstd = format!("zstd {level_used} (the engine's)");
        for (coding, what) in [(Coding::Gzip, "gzip 6"), (Coding::Brotli, "br 5"), (Coding::Zstd, engine_zstd.as_str())] {
            let packed = compress_now(coding, &body).expect("compresses");
            assert_eq!(decode(coding, &packed), body);
            let c = ms_per_mb(&body, |b| compress_now(coding, b).unwrap().len());
            let d = ms_per_mb(&packed, |p| decode(coding, p).len()) * packed.len() as f64 / body.len() as f64;
            println!("| {label} | {what} | {:.2} | {c:.2} | {d:.2} |", body.len() as f64 / packed.len() as f64);
        }
        for level in [1, 3, 4, 6, 9].into_iter().filter(|&l| l != level_used) {
            let packed = zstd::bulk::compress(&body, level).unwrap();
            let c = ms_per_mb(&body, |b| zstd::bulk::compress(b, level).unwrap().len());
            println!("| {label} | zstd {level} | {:.2} | {c:.2} | |", body.len() as f64 / packed.len() as f64);
        }
    }
}
