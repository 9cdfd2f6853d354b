//! Method + path routing: `{name}` parameters and a trailing `{*rest}` wildcard.
//! 404 and 405 (with `Allow`) are decided here so every host gets them the same.

use crate::error::{Error, ErrorKind, Result};
use crate::handler::Handler;
use http::Method;
use std::sync::Arc;

/// What a route leads to.
#[derive(Clone)]
pub enum Endpoint {
    /// A handler. `stream_body`: the host reads the body in pieces instead of getting it
    /// whole.
    /// `pool`: the handler may block on its own exchange (a blocking write or read), so
    /// auto dispatch always gives it a pool thread instead of its connection's I/O thread.
    Http { handler: Handler, stream_body: bool, pool: bool },
    /// A WebSocket endpoint: the upgrade request goes to its open callback.
    WebSocket(Arc<crate::ws::WsRoute>),
}

impl Endpoint {
    pub fn handler(handler: Handler) -> Endpoint {
        Endpoint::Http { handler, stream_body: false, pool: false }
    }
}

struct PathEntry {
    pattern: String,
    any: Option<Endpoint>,
    methods: Vec<(Method, Endpoint)>,
    /// A WebSocket endpoint takes the upgrades on this path; plain requests still go to
    /// the HTTP routes beside it (an ASGI app serves both on one catch-all).
    ws: Option<Endpoint>,
}

/// What a request resolved to.
pub enum Match<'a> {
    Found { endpoint: &'a Endpoint, route: &'a str, params: Vec<(String, String)> },
    MethodNotAllowed { allow: String },
    NotFound,
}

#[derive(Default)]
pub struct Router {
    paths: matchit::Router<usize>,
    /// The patterns without parameters, by their text: one hash lookup answers the usual
    /// request before matchit's walk and its parameter list (matchit gives a literal
    /// segment precedence over a parameter, so a path found here is the one it finds).
    exact: foldhash::HashMap<Box<str>, usize>,
    entries: Vec<PathEntry>,
}

impl Router {
    pub fn new() -> Self {
        Self::default()
    }

    /// `method` None means any method. Non-ASCII literal text is matched in its
    /// percent-encoded form, as it arrives on the wire.
    pub fn add(&mut self, method: Option<Method>, pattern: &str, handler: Endpoint) -> Result<()> {
        if !pattern.starts_with('/') {
            return Err(Error::new(ErrorKind::Route, format!("route pattern {pattern:?} must start with '/'")));
        }
        let encoded = encode_non_ascii(pattern);
        let pattern = encoded.as_str();
        let params = count_params(pattern);
        if params > MAX_PARAMS {
            return Err(Error::new(
                ErrorKind::Route,
                format!("route pattern {pattern:?} has {params} parameters; at most {MAX_PARAMS} are supported"),
            ));
        }
        let index = match self.entries.iter().position(|e| e.pattern == pattern) {
            Some(i) => i,
            None => {
                self.paths
                    .insert(pattern, self.entries.len())
                    .map_err(|e| Error::new(ErrorKind::Route, format!("route pattern {pattern:?}: {e}")))?;
                if !pattern.contains(['{', '}']) {
                    self.exact.insert(pattern.into(), self.entries.len());
                }
                self.entries.push(PathEntry { pattern: pattern.to_owned(), any: None, methods: Vec::new(), ws: None });
                self.entries.len() - 1
            }
        };
        let entry = &mut self.entries[index];
        if let Endpoint::WebSocket(_) = handler {
            if entry.ws.is_some() {
                return Err(Error::new(ErrorKind::Route, format!("a WebSocket endpoint on {pattern} is already registered")));
            }
            entry.ws = Some(handler);
            return Ok(());
        }
        let taken = match &method {
            None => entry.any.is_some(),
            Some(m) => entry.methods.iter().any(|(x, _)| x == m),
        };
        if taken {
            let name = method.as_ref().map_or("any method", |m| m.as_str());
            return Err(Error::new(ErrorKind::Route, format!("route {name} {pattern} is already registered")));
        }
        match method {
            None => entry.any = Some(handler),
            Some(m) => entry.methods.push((m, handler)),
        }
        Ok(())
    }

    /// `upgrade`: the request asks for a WebSocket upgrade.
    pub fn find(&self, method: &Method, path: &str, upgrade: bool) -> Match<'_> {
        let upper;
        let path = if path.contains('%') {
            upper = uppercase_escapes(path);
            upper.as_str()
        } else {
            path
        };
        let (index, found) = match self.exact.get(path) {
            Some(&index) => (index, None),
            None => match self.paths.at(path) {
                Ok(found) => (*found.value, Some(found.params)),
                Err(_) => return Match::NotFound,
            },
        };
        let entry = &self.entries[index];
        let params = || found.as_ref().map_or_else(Vec::new, |p| p.iter().map(|(k, v)| (k.to_owned(), percent_decode(v))).collect());
        if let Some(ws) = entry.ws.as_ref().filter(|_| upgrade) {
            return Match::Found { endpoint: ws, route: &entry.pattern, params: params() };
        }
        let by_method = |m: &Method| entry.methods.iter().find(|(x, _)| x == m).map(|(_, h)| h);
        let handler = by_method(method)
            .or_else(|| if *method == Method::HEAD { by_method(&Method::GET) } else { None })
            .or(entry.any.as_ref())
            // A plain GET on a WebSocket-only path reaches the endpoint, which answers 426.
            .or_else(|| entry.ws.as_ref().filter(|_| *method == Method::GET));
        match handler {
            Some(endpoint) => Match::Found { endpoint, route: &entry.pattern, params: params() },
            None => Match::MethodNotAllowed { allow: allow_list(entry) },
        }
    }

    /// Drops every handler, which runs each registration's release callback.
    pub fn clear(&mut self) {
        self.entries.clear();
        self.exact.clear();
        self.paths = matchit::Router::new();
    }
}

/// matchit names `{param}`s 'a'..='z' internally and panics on the 26th (a catch-all is
/// not counted), so the router refuses such a pattern with an error first.
const MAX_PARAMS: usize = 25;

/// `{name}` parameters in a pattern; `{{`/`}}` are literal braces, `{*rest}` is the catch-all.
fn count_params(pattern: &str) -> usize {
    let bytes = pattern.as_bytes();
    let (mut n, mut i) = (0, 0);
    while i < bytes.len() {
        let b = bytes[i];
        if (b == b'{' || b == b'}') && bytes.get(i + 1) == Some(&b) {
            i += 2;
            continue;
        }
        if b == b'{' && bytes.get(i + 1) != Some(&b'*') {
            n += 1;
        }
        i += 1;
    }
    n
}

fn allow_list(entry: &PathEntry) -> String {
    let mut names: Vec<&str> = entry.methods.iter().map(|(m, _)| m.as_str()).collect();
    if entry.ws.is_some() && !names.contains(&"GET") {
        names.push("GET");
    }
    if names.contains(&"GET") && !names.contains(&"HEAD") {
        names.push("HEAD");
    }
    names.join(", ")
}

/// The literal text of a pattern as a client sends it: "/städte" → "/st%C3%A4dte", and
/// escapes in upper-case hex ("/a%2f" → "/a%2F", since `find` upper-cases the path's).
/// Parameter names (`{name}`, `{*name}`) are left as written: the host looks them up by
/// that name. `{{` and `}}` are matchit's escaped braces, literal text.
fn encode_non_ascii(pattern: &str) -> String {
    let bytes = pattern.as_bytes();
    let mut out = String::with_capacity(pattern.len());
    let mut in_param = false;
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        let escaped_brace = (b == b'{' || b == b'}') && bytes.get(i + 1) == Some(&b);
        if in_param {
            in_param = b != b'}';
        } else if escaped_brace {
            out.push(b as char);
            out.push(b as char);
            i += 2;
            continue;
        } else if b == b'{' {
            in_param = true;
        } else if b == b'%' && i + 2 < bytes.len() && bytes[i + 1].is_ascii_hexdigit() && bytes[i + 2].is_ascii_hexdigit() {
            out.push('%');
            out.push(bytes[i + 1].to_ascii_uppercase() as char);
            out.push(bytes[i + 2].to_ascii_uppercase() as char);
            i += 3;
            continue;
        } else if !b.is_ascii() {
            out.push_str(&format!("%{b:02X}"));
            i += 1;
            continue;
        }
        // Inside a parameter the bytes are copied whole, so a multi-byte character stays one.
        let len = utf8_len(b);
        out.push_str(&pattern[i..i + len]);
        i += len;
    }
    out
}

fn utf8_len(first: u8) -> usize {
    match first {
        0xF0.. => 4,
        0xE0.. => 3,
        0xC0.. => 2,
        _ => 1,
    }
}

/// "%c3%a4" → "%C3%A4", so a client's choice of hex case does not change the match.
fn uppercase_escapes(path: &str) -> String {
    let mut out = path.as_bytes().to_vec();
    let mut i = 0;
    while i < out.len() {
        if out[i] == b'%' && i + 2 < out.len() && out[i + 1].is_ascii_hexdigit() && out[i + 2].is_ascii_hexdigit() {
            out[i + 1] = out[i + 1].to_ascii_uppercase();
            out[i + 2] = out[i + 2].to_ascii_uppercase();
            i += 3;
        } else {
            i += 1;
        }
    }
    String::from_utf8(out).unwrap_or_else(|_| path.to_owned())
}

/// Decodes %XX escapes; a result that is not UTF-8 keeps the raw text so nothing is lost.
pub fn percent_decode(raw: &str) -> String {
    if !raw.contains('%') {
        return raw.to_owned();
    }
    let bytes = raw.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = |b: u8| (b as char).to_digit(16);
            if let (Some(h), Some(l)) = (bytes.get(i + 1).and_then(|b| hex(*b)), bytes.get(i + 2).and_then(|b| hex(*b))) {
                out.push((h * 16 + l) as u8);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8(out).unwrap_or_else(|_| raw.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn h() -> Endpoint {
        Endpoint::handler(handler())
    }

    fn handler() -> Handler {
        Arc::new(|_req| {})
    }

    #[test]
    fn params_and_wildcard_are_captured_and_decoded() {
        let mut r = Router::new();
        r.add(Some(Method::GET), "/users/{id}", h()).unwrap();
        r.add(None, "/files/{*rest}", h()).unwrap();
        match r.find(&Method::GET, "/users/j%C3%BCrgen", false) {
            Match::Found { params, route, .. } => {
                assert_eq!(route, "/users/{id}");
                assert_eq!(params, vec![("id".to_string(), "jürgen".to_string())]);
            }
            _ => panic!("expected a match"),
        }
        match r.find(&Method::DELETE, "/files/a/b.txt", false) {
            Match::Found { params, .. } => assert_eq!(params[0].1, "a/b.txt"),
            _ => panic!("expected a match"),
        }
    }

    #[test]
    fn a_literal_path_beside_a_parameter_is_found_either_way() {
        let mut r = Router::new();
        r.add(Some(Method::GET), "/users/{id}", h()).unwrap();
        r.add(Some(Method::GET), "/users/new", h()).unwrap();
        r.add(Some(Method::GET), "/a{{b}}", h()).unwrap();
        r.add(None, "/{*rest}", h()).unwrap();
        let route = |path: &str| match r.find(&Method::GET, path, false) {
            Match::Found { route, params, .. } => (route.to_string(), params),
            _ => panic!("expected a match for {path}"),
        };
        assert_eq!(route("/users/new"), ("/users/new".to_string(), vec![]));
        assert_eq!(route("/users/old"), ("/users/{id}".to_string(), vec![("id".to_string(), "old".to_string())]));
        assert_eq!(route("/a{b}").0, "/a{{b}}");
        assert_eq!(route("/users/new/").0, "/{*rest}");
        // matchit's catch-all needs at least one character.
        assert!(matches!(r.find(&Method::GET, "/", false), Match::NotFound));
    }

    #[test]
    fn unknown_path_is_not_found_and_wrong_method_lists_allow() {
        let mut r = Router::new();
        r.add(Some(Method::GET), "/", h()).unwrap();
        r.add(Some(Method::POST), "/", h()).unwrap();
        assert!(matches!(r.find(&Method::GET, "/nope", false), Match::NotFound));
        match r.find(&Method::DELETE, "/", false) {
            Match::MethodNotAllowed { allow } => assert_eq!(allow, "GET, POST, HEAD"),
            _ => panic!("expected 405"),
        }
        assert!(matches!(r.find(&Method::HEAD, "/", false), Match::Found { .. }));
    }

    #[test]
    fn duplicate_and_malformed_routes_are_rejected() {
        let mut r = Router::new();
        r.add(Some(Method::GET), "/a", h()).unwrap();
        assert_eq!(r.add(Some(Method::GET), "/a", h()).unwrap_err().kind, ErrorKind::Route);
        assert_eq!(r.add(None, "no-slash", h()).unwrap_err().kind, ErrorKind::Route);
        assert_eq!(r.add(None, "/x/{*rest}/y", h()).unwrap_err().kind, ErrorKind::Route);
    }

    #[test]
    fn non_ascii_literals_match_either_hex_case() {
        let mut r = Router::new();
        r.add(Some(Method::GET), "/städte/{name}", h()).unwrap();
        for path in ["/st%C3%A4dte/x", "/st%c3%a4dte/x"] {
            match r.find(&Method::GET, path, false) {
                Match::Found { route, params, .. } => {
                    assert_eq!(route, "/st%C3%A4dte/{name}");
                    assert_eq!(params[0].1, "x");
                }
                _ => panic!("{path} should match"),
            }
        }
    }

    #[test]
    fn non_ascii_parameter_names_are_kept_as_written() {
        // Found by the router fuzz target: the name came back percent-encoded.
        let mut r = Router::new();
        r.add(Some(Method::GET), "/stadt/{städte}", h()).unwrap();
        match r.find(&Method::GET, "/stadt/x", false) {
            Match::Found { params, route, .. } => {
                assert_eq!(params, vec![("städte".to_string(), "x".to_string())]);
                assert_eq!(route, "/stadt/{städte}");
            }
            _ => panic!("expected a match"),
        }
    }

    #[test]
    fn escapes_in_patterns_match_either_hex_case() {
        // Found by the router fuzz target: "/a%2f" was registered but never matched,
        // since find upper-cases the path's escapes.
        let mut r = Router::new();
        r.add(Some(Method::GET), "/a%2fb", h()).unwrap();
        for path in ["/a%2fb", "/a%2Fb"] {
            assert!(matches!(r.find(&Method::GET, path, false), Match::Found { .. }), "{path}");
        }
        assert_eq!(r.add(Some(Method::GET), "/a%2Fb", h()).unwrap_err().kind, ErrorKind::Route);
    }

    #[test]
    fn a_path_written_plain_and_escaped_is_one_path() {
        // The router fuzz target once expected 405 here: it grouped routes by the text
        // as written, while the router (rightly) files both under "/%CF%9F".
        let mut r = Router::new();
        r.add(None, "/ϟ", h()).unwrap();
        r.add(Some(Method::GET), "/%CF%9F", h()).unwrap();
        assert!(matches!(r.find(&Method::PATCH, "/%cf%9f", false), Match::Found { route: "/%CF%9F", .. }));
        assert_eq!(r.add(None, "/%cf%9f", h()).unwrap_err().kind, ErrorKind::Route);
    }

    #[test]
    fn too_many_parameters_are_refused_not_a_panic() {
        // Found by the router fuzz target: matchit panicked on a pattern's 26th parameter.
        let pattern = |n: usize| (0..n).map(|i| format!("/{{p{i}}}")).collect::<String>();
        let mut r = Router::new();
        r.add(Some(Method::GET), &(pattern(25) + "/{*rest}"), h()).unwrap();
        let err = r.add(Some(Method::GET), &format!("/x{}", pattern(26)), h()).unwrap_err();
        assert_eq!(err.kind, ErrorKind::Route);
        assert!(err.to_string().contains("26 parameters"), "{err}");
        assert!(matches!(r.find(&Method::GET, &("/1".repeat(25) + "/z"), false), Match::Found { .. }));
    }

    #[test]
    fn percent_decode_keeps_invalid_sequences() {
        assert_eq!(percent_decode("a%20b"), "a b");
        assert_eq!(percent_decode("100%"), "100%");
        assert_eq!(percent_decode("%zz"), "%zz");
        assert_eq!(percent_decode("%FF"), "%FF");
    }
}
