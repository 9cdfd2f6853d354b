//! Request filtering, before anything else sees the request: client IP / CIDR allow and
//! deny lists (403), a maximum request-target length (414), the allowed methods (405
//! with `Allow`), and denied path patterns (404, as if nothing were there).

use crate::error::{Error, ErrorKind, Result};
use crate::request::Answer;
use crate::response::canned;
use http::header::{HeaderValue, ALLOW};
use http::{Method, Uri};
use ipnet::IpNet;
use std::net::{IpAddr, SocketAddr};

#[derive(Debug, Clone, Default)]
pub struct FilterConfig {
    allow: Vec<IpNet>,
    deny: Vec<IpNet>,
    /// The longest request target accepted (path and query as sent); 0 = no limit.
    pub max_url_bytes: usize,
    methods: Option<(Vec<Method>, HeaderValue)>,
    patterns: Vec<Pattern>,
}

impl FilterConfig {
    pub fn has_ip_rules(&self) -> bool {
        !self.allow.is_empty() || !self.deny.is_empty()
    }

    pub fn is_empty(&self) -> bool {
        self.allow.is_empty() && self.deny.is_empty() && self.max_url_bytes == 0 && self.methods.is_none() && self.patterns.is_empty()
    }

    /// Adds an address ("10.1.2.3", "::1") or a network ("10.0.0.0/8", "fd00::/8") to the
    /// allow list (`allow`) or the deny list. With an allow list, only clients in it are
    /// served; the deny list wins over it.
    pub fn add_ip(&mut self, rule: &str, allow: bool) -> Result<()> {
        let rule = rule.trim();
        let net = match rule.parse::<IpNet>() {
            Ok(n) => n.trunc(),
            Err(_) => match rule.parse::<IpAddr>() {
                Ok(ip) => IpNet::from(ip),
                Err(_) => {
                    return Err(Error::new(
                        ErrorKind::InvalidArg,
                        format!("{rule:?} is neither an IP address nor a CIDR network like \"10.0.0.0/8\""),
                    ))
                }
            },
        };
        if allow { self.allow.push(net) } else { self.deny.push(net) }
        Ok(())
    }

    /// The methods served, as a comma-separated list ("GET, HEAD, POST").
    pub fn set_methods(&mut self, list: &str) -> Result<()> {
        let mut methods = Vec::new();
        for m in list.split(',').map(str::trim).filter(|m| !m.is_empty()) {
            let method = Method::from_bytes(m.as_bytes())
                .map_err(|_| Error::new(ErrorKind::InvalidArg, format!("{m:?} is not an HTTP method")))?;
            if !methods.contains(&method) {
                methods.push(method);
            }
        }
        if methods.is_empty() {
            return Err(Error::new(ErrorKind::InvalidArg, "the list of allowed methods is empty"));
        }
        let allow = methods.iter().map(Method::as_str).collect::<Vec<_>>().join(", ");
        let allow = HeaderValue::from_str(&allow).map_err(|_| Error::new(ErrorKind::InvalidArg, "bad method list"))?;
        self.methods = Some((methods, allow));
        Ok(())
    }

    /// A denied path pattern: `*` matches any run of characters (`/` included), `?` one;
    /// matched without regard to ASCII case against the whole percent-decoded path with
    /// its dot segments resolved ("/admin/*", "*.bak", "*/.git/*").
    pub fn deny_path(&mut self, pattern: &str) -> Result<()> {
        if pattern.is_empty() || pattern.contains('\0') {
            return Err(Error::new(ErrorKind::InvalidArg, "a path pattern must be non-empty and without NUL"));
        }
        self.patterns.push(Pattern::new(pattern.to_ascii_lowercase().into_bytes()));
        Ok(())
    }

    /// The answer for a request the filter refuses; None lets it through. `remote`: the
    /// client ("ip:port" or "ip").
    pub fn check(&self, method: &Method, uri: &Uri, remote: &str) -> Option<Answer> {
        self.check_ip(method, uri, || parse_client(remote))
    }

    /// Like `check`, with the client's address made only when IP rules need it (None:
    /// unknown, refused by any IP rule).
    pub fn check_ip(&self, method: &Method, uri: &Uri, client: impl FnOnce() -> Option<IpAddr>) -> Option<Answer> {
        if !self.allow.is_empty() || !self.deny.is_empty() {
            let ip = client().map(|ip| ip.to_canonical());
            let denied = match ip {
                Some(ip) => self.deny.iter().any(|n| n.contains(&ip)) || (!self.allow.is_empty() && !self.allow.iter().any(|n| n.contains(&ip))),
                None => true,
            };
            if denied {
                return Some(canned(403, false));
            }
        }
        if self.max_url_bytes > 0 {
            let target = uri.path_and_query().map_or(uri.path().len(), |p| p.as_str().len());
            if target > self.max_url_bytes {
                return Some(canned(414, false));
            }
        }
        if let Some((methods, allow)) = &self.methods {
            if !methods.contains(method) {
                let mut a = canned(405, false);
                a.headers.insert(ALLOW, allow.clone());
                return Some(a);
            }
        }
        if !self.patterns.is_empty() {
            let raw = uri.path();
            let normalized;
            let path = if is_plain(raw) {
                raw
            } else {
                normalized = normalize(raw);
                normalized.as_str()
            };
            if self.patterns.iter().any(|p| p.matches(path.as_bytes())) {
                return Some(canned(404, false));
            }
        }
        None
    }
}

/// "1.2.3.4:5", "[::1]:5", "1.2.3.4" or "::1".
pub(crate) fn parse_client(remote: &str) -> Option<IpAddr> {
    remote
        .parse::<SocketAddr>()
        .map(|a| a.ip())
        .or_else(|_| remote.trim_start_matches('[').trim_end_matches(']').parse::<IpAddr>())
        .ok()
}

/// The path as a file system or a host framework would see it: percent-decoded (twice
/// over is not undone: "%252e" stays "%2e"), backslashes as slashes, repeated slashes
/// merged, "." and ".." segments resolved, never above the root.
pub(crate) fn normalize(raw: &str) -> String {
    if is_plain(raw) {
        return raw.to_owned();
    }
    let decoded = crate::router::percent_decode(raw).replace('\\', "/");
    let mut out: Vec<&str> = Vec::new();
    for seg in decoded.split('/') {
        match seg {
            "" | "." => {}
            ".." => {
                out.pop();
            }
            s => out.push(s),
        }
    }
    let mut path = String::with_capacity(decoded.len() + 1);
    for seg in &out {
        path.push('/');
        path.push_str(seg);
    }
    if path.is_empty() || decoded.ends_with('/') {
        path.push('/');
    }
    path
}

/// Most paths have nothing to undo: no escapes, backslashes, empty or dot segments. One
/// pass over the bytes (it runs for every request when path patterns are set).
fn is_plain(raw: &str) -> bool {
    let b = raw.as_bytes();
    if b.first() != Some(&b'/') {
        return false;
    }
    let mut prev = 0;
    for &c in b {
        match c {
            b'%' | b'\\' => return false,
            // "//" and "/." (an empty or a dot segment, or a dotfile: resolved the same way).
            b'/' | b'.' if prev == b'/' => return false,
            _ => {}
        }
        prev = c;
    }
    true
}

/// A denied path pattern (lower-case) in the cheapest form that matches the same paths:
/// the usual "*.bak" and "/admin/*" are a comparison of the path's end or start, not a
/// glob walk with backtracking on every request.
#[derive(Debug, Clone)]
enum Pattern {
    /// "*" then no wildcard: the path ends with this.
    Suffix(Vec<u8>),
    /// No wildcard then "*": the path starts with this.
    Prefix(Vec<u8>),
    Glob(Vec<u8>),
}

impl Pattern {
    fn new(lower: Vec<u8>) -> Pattern {
        let plain = |b: &[u8]| !b.iter().any(|&c| c == b'*' || c == b'?');
        if let Some(end) = lower.strip_prefix(b"*").filter(|r| plain(r)) {
            return Pattern::Suffix(end.to_vec());
        }
        if let Some(start) = lower.strip_suffix(b"*").filter(|r| plain(r)) {
            return Pattern::Prefix(start.to_vec());
        }
        Pattern::Glob(lower)
    }

    fn matches(&self, text: &[u8]) -> bool {
        let same = |t: &[u8], p: &[u8]| t.iter().zip(p).all(|(t, p)| t.to_ascii_lowercase() == *p);
        match self {
            Pattern::Suffix(end) => text.len() >= end.len() && same(&text[text.len() - end.len()..], end),
            Pattern::Prefix(start) => text.len() >= start.len() && same(&text[..start.len()], start),
            Pattern::Glob(p) => glob(p, text),
        }
    }
}

/// `*` any run (also empty), `?` any one byte; the whole text must match. `pattern` is
/// lower-case; the text is compared as if it were.
fn glob(pattern: &[u8], text: &[u8]) -> bool {
    let (mut p, mut t) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        if p < pattern.len() && (pattern[p] == b'?' || pattern[p] == text[t].to_ascii_lowercase()) {
            p += 1;
            t += 1;
        } else if p < pattern.len() && pattern[p] == b'*' {
            star = Some((p, t));
            p += 1;
        } else if let Some((sp, st)) = star {
            p = sp + 1;
            t = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    while p < pattern.len() && pattern[p] == b'*' {
        p += 1;
    }
    p == pattern.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn uri(s: &str) -> Uri {
        s.parse().unwrap()
    }

    #[test]
    fn glob_matches_whole_paths() {
        assert!(glob(b"/admin/*", b"/admin/x/y"));
        assert!(glob(b"*.bak", b"/a/b.bak"));
        assert!(!glob(b"*.bak", b"/a/b.bak2"));
        assert!(glob(b"*/.git/*", b"/x/.git/config"));
        assert!(glob(b"/a?c", b"/abc"));
        assert!(!glob(b"/admin/*", b"/administrator"));
        assert!(glob(b"*.bak", b"/A/B.BAK"));
    }

    #[test]
    fn plain_paths_are_told_in_one_pass() {
        for p in ["/", "/a/", "/a/b.txt", "/a.b/c", "/static/1k.json", "/x-y_z~"] {
            assert!(is_plain(p), "{p}");
        }
        for p in ["", "a", "//a", "/a//b", "/./a", "/a/..", "/a/.b", "/a%2e", "/a\\b"] {
            assert!(!is_plain(p), "{p}");
        }
    }

    #[test]
    fn prefix_and_suffix_patterns_match_as_the_glob_does() {
        let texts: [&[u8]; 8] = [b"/a/b.bak", b"/A/B.BAK", b"/admin/x", b"/admin", b"/administrator", b"/", b"", b"/x.bak/y"];
        for pat in ["*.bak", "/admin/*", "*", "/a?c*", "*x*", "/admin", "**.bak"] {
            let p = Pattern::new(pat.as_bytes().to_vec());
            for t in texts {
                assert_eq!(p.matches(t), glob(pat.as_bytes(), t), "{pat} on {:?}", String::from_utf8_lossy(t));
            }
        }
        assert!(matches!(Pattern::new(b"*.bak".to_vec()), Pattern::Suffix(_)));
        assert!(matches!(Pattern::new(b"/admin/*".to_vec()), Pattern::Prefix(_)));
    }

    #[test]
    fn normalize_decodes_and_resolves_dot_segments() {
        assert_eq!(normalize("/a/../admin/x"), "/admin/x");
        assert_eq!(normalize("/%2e%2e/%2E%2e/admin"), "/admin");
        assert_eq!(normalize("/a\\..\\admin"), "/admin");
        assert_eq!(normalize("//admin//x/"), "/admin/x/");
        assert_eq!(normalize("/"), "/");
        assert_eq!(normalize("/%252e%252e/x"), "/%2e%2e/x");
    }

    #[test]
    fn ip_rules_deny_wins_and_allow_lists_are_exclusive() {
        let mut f = FilterConfig::default();
        f.add_ip("127.0.0.0/8", true).unwrap();
        f.add_ip("127.0.0.2", false).unwrap();
        let get = Method::GET;
        assert!(f.check(&get, &uri("/"), "127.0.0.1:5000").is_none());
        assert_eq!(f.check(&get, &uri("/"), "127.0.0.2:5000").unwrap().status, 403);
        assert_eq!(f.check(&get, &uri("/"), "10.0.0.1:5000").unwrap().status, 403);
        assert!(f.check(&get, &uri("/"), "[::ffff:127.0.0.1]:5000").is_none());
        assert!(f.check(&get, &uri("/"), "127.0.0.1").is_none());
        assert_eq!(f.check(&get, &uri("/"), "127.0.0.2").unwrap().status, 403);
        assert!(f.add_ip("nonsense", true).is_err());
        assert!(f.add_ip("10.0.0.0/33", true).is_err());
    }

    #[test]
    fn url_length_methods_and_patterns_are_refused_with_their_status() {
        let mut f = FilterConfig { max_url_bytes: 20, ..Default::default() };
        f.set_methods("GET, HEAD").unwrap();
        f.deny_path("*.bak").unwrap();
        let r = "127.0.0.1:1";
        assert_eq!(f.check(&Method::GET, &uri("/aaaaaaaaaa?bbbbbbbbbbbb"), r).unwrap().status, 414);
        let a = f.check(&Method::POST, &uri("/"), r).unwrap();
        assert_eq!(a.status, 405);
        assert_eq!(a.headers["allow"], "GET, HEAD");
        assert_eq!(f.check(&Method::GET, &uri("/x/Y.BAK"), r).unwrap().status, 404);
        assert_eq!(f.check(&Method::GET, &uri("/x/y%2ebak"), r).unwrap().status, 404);
        assert!(f.check(&Method::GET, &uri("/x/y.txt"), r).is_none());
        assert!(f.set_methods(" , ").is_err());
        assert!(f.set_methods("GET, BAD METHOD").is_err());
    }
}
