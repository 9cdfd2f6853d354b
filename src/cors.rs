//! CORS (the Fetch standard's protocol) per path prefix. Preflights (OPTIONS with
//! `Origin` and `Access-Control-Request-Method`) are answered by the engine without the
//! host; other answers to an allowed origin get the `Access-Control-Allow-*` headers.

use crate::compress::under;
use crate::error::{Error, ErrorKind, Result};
use crate::request::Answer;
use crate::response::canned;
use bytes::Bytes;
use http::header::{
    HeaderMap, HeaderName, HeaderValue, ACCESS_CONTROL_ALLOW_CREDENTIALS, ACCESS_CONTROL_ALLOW_HEADERS,
    ACCESS_CONTROL_ALLOW_METHODS, ACCESS_CONTROL_ALLOW_ORIGIN, ACCESS_CONTROL_EXPOSE_HEADERS, ACCESS_CONTROL_MAX_AGE,
    ACCESS_CONTROL_REQUEST_HEADERS, ACCESS_CONTROL_REQUEST_METHOD, ORIGIN, VARY,
};
use http::Method;

/// `EMBER_CORS_CREDENTIALS`: allow credentials (cookies, HTTP auth) on cross-origin requests.
pub(crate) const CREDENTIALS: u32 = 1;

#[derive(Debug, Clone)]
pub struct CorsPolicy {
    pub prefix: String,
    /// None: any origin.
    origins: Option<Vec<String>>,
    methods: Vec<Method>,
    methods_value: HeaderValue,
    /// None: whatever the preflight asks for is allowed.
    headers: Option<Vec<String>>,
    expose: Option<HeaderValue>,
    max_age: Option<HeaderValue>,
    credentials: bool,
}

fn list(s: &str) -> Vec<String> {
    s.split(',').map(|t| t.trim().to_owned()).filter(|t| !t.is_empty()).collect()
}

fn bad(what: &str) -> Error {
    Error::new(ErrorKind::InvalidArg, what.to_owned())
}

impl CorsPolicy {
    /// `origins`: "*" or a comma-separated list of origins ("https://a.example,
    /// http://localhost:3000"). `methods`: comma-separated (None: GET, HEAD, POST).
    /// `headers`: the request headers allowed (None or "*": any the preflight names).
    /// `expose`: response headers scripts may read. `max_age`: seconds a browser may keep
    /// the preflight's answer (0: no `Access-Control-Max-Age`).
    pub fn new(
        prefix: &str,
        origins: &str,
        methods: Option<&str>,
        headers: Option<&str>,
        expose: Option<&str>,
        max_age: u32,
        flags: u32,
    ) -> Result<CorsPolicy> {
        if !prefix.starts_with('/') {
            return Err(bad(&format!("CORS prefix {prefix:?} must start with '/'")));
        }
        if flags & !CREDENTIALS != 0 {
            return Err(bad(&format!("CORS flags {flags:#x} include unknown bits")));
        }
        let origins = match origins.trim() {
            "*" => None,
            o => {
                let l: Vec<String> = list(o).into_iter().map(|s| s.trim_end_matches('/').to_ascii_lowercase()).collect();
                if l.is_empty() || l.iter().any(|o| !o.contains("://") || HeaderValue::from_str(o).is_err()) {
                    return Err(bad(&format!("CORS origins {origins:?}: give \"*\" or origins like \"https://app.example\"")));
                }
                Some(l)
            }
        };
        let methods: Vec<Method> = match methods {
            None => vec![Method::GET, Method::HEAD, Method::POST],
            Some(m) => list(m)
                .iter()
                .map(|m| Method::from_bytes(m.as_bytes()).map_err(|_| bad(&format!("CORS method {m:?} is not a method token"))))
                .collect::<Result<_>>()?,
        };
        if methods.is_empty() {
            return Err(bad("CORS: the method list is empty"));
        }
        let methods_value = HeaderValue::from_str(&methods.iter().map(Method::as_str).collect::<Vec<_>>().join(", "))
            .map_err(|_| bad("CORS: bad method list"))?;
        let headers = match headers.map(str::trim) {
            None | Some("*") => None,
            Some(h) => {
                let l: Vec<String> = list(h).into_iter().map(|s| s.to_ascii_lowercase()).collect();
                if l.iter().any(|h| HeaderName::from_bytes(h.as_bytes()).is_err()) {
                    return Err(bad(&format!("CORS headers {h:?}: not a list of header names")));
                }
                Some(l)
            }
        };
        let expose = match expose.map(str::trim).filter(|e| !e.is_empty()) {
            None => None,
            Some(e) => Some(HeaderValue::from_str(e).map_err(|_| bad(&format!("CORS exposed headers {e:?} are not a header value")))?),
        };
        let max_age = (max_age > 0).then(|| HeaderValue::from(max_age));
        Ok(CorsPolicy { prefix: prefix.to_owned(), origins, methods, methods_value, headers, expose, max_age, credentials: flags & CREDENTIALS != 0 })
    }

    fn allows(&self, origin: &HeaderValue) -> bool {
        match &self.origins {
            None => true,
            Some(list) => origin.to_str().is_ok_and(|o| {
                let o = o.trim_end_matches('/');
                list.iter().any(|a| a.eq_ignore_ascii_case(o))
            }),
        }
    }

    /// Allow-Origin (and Vary: Origin when the answer depends on it), Allow-Credentials.
    fn allow_origin(&self, origin: &HeaderValue, headers: &mut HeaderMap) {
        // "*" cannot carry credentials: then the origin itself is named.
        if self.origins.is_none() && !self.credentials {
            headers.insert(ACCESS_CONTROL_ALLOW_ORIGIN, HeaderValue::from_static("*"));
        } else {
            headers.insert(ACCESS_CONTROL_ALLOW_ORIGIN, origin.clone());
            add_vary(headers, "Origin");
        }
        if self.credentials {
            headers.insert(ACCESS_CONTROL_ALLOW_CREDENTIALS, HeaderValue::from_static("true"));
        }
    }

    /// The engine's answer when `headers` make a preflight request; None otherwise.
    pub fn preflight(&self, method: &Method, headers: &HeaderMap) -> Option<Answer> {
        if method != Method::OPTIONS {
            return None;
        }
        let origin = headers.get(ORIGIN)?;
        let wanted = headers.get(ACCESS_CONTROL_REQUEST_METHOD)?;
        let method_ok = Method::from_bytes(wanted.as_bytes()).is_ok_and(|m| self.methods.contains(&m));
        let asked = headers.get_all(ACCESS_CONTROL_REQUEST_HEADERS).iter().filter_map(|v| v.to_str().ok()).flat_map(list).collect::<Vec<_>>();
        let headers_ok = match &self.headers {
            None => true,
            Some(allowed) => asked.iter().all(|h| allowed.iter().any(|a| a.eq_ignore_ascii_case(h))),
        };
        if !self.allows(origin) || !method_ok || !headers_ok {
            let mut a = canned(403, false);
            a.body = Bytes::from_static(b"403 Forbidden: CORS preflight refused\n");
            add_vary(&mut a.headers, "Origin, Access-Control-Request-Method, Access-Control-Request-Headers");
            return Some(a);
        }
        let mut a = Answer::new(204, HeaderMap::new(), Bytes::new());
        self.allow_origin(origin, &mut a.headers);
        a.headers.insert(ACCESS_CONTROL_ALLOW_METHODS, self.methods_value.clone());
        if !asked.is_empty() {
            // Named back exactly (the policy allows them all, or this list is within it).
            if let Ok(v) = HeaderValue::from_str(&asked.join(", ")) {
                a.headers.insert(ACCESS_CONTROL_ALLOW_HEADERS, v);
            }
        }
        if let Some(age) = &self.max_age {
            a.headers.insert(ACCESS_CONTROL_MAX_AGE, age.clone());
        }
        add_vary(&mut a.headers, "Access-Control-Request-Method, Access-Control-Request-Headers");
        Some(a)
    }

    /// Adds the CORS headers to an answer for a request from `origin`, when allowed.
    pub fn decorate(&self, origin: Option<&HeaderValue>, headers: &mut HeaderMap) {
        let Some(origin) = origin else {
            // A later request with an Origin would get another answer: caches must know.
            if self.origins.is_some() || self.credentials {
                add_vary(headers, "Origin");
            }
            return;
        };
        if !self.allows(origin) {
            add_vary(headers, "Origin");
            return;
        }
        self.allow_origin(origin, headers);
        if let Some(e) = &self.expose {
            headers.insert(ACCESS_CONTROL_EXPOSE_HEADERS, e.clone());
        }
    }
}

/// The policy for `path`: the one with the longest matching prefix.
pub fn find<'a>(policies: &'a [CorsPolicy], path: &str) -> Option<&'a CorsPolicy> {
    policies.iter().filter(|p| under(path, &p.prefix)).max_by_key(|p| p.prefix.len())
}

fn add_vary(headers: &mut HeaderMap, value: &'static str) {
    let has = |name: &str| headers.get_all(VARY).iter().any(|v| v.to_str().is_ok_and(|s| s.split(',').any(|t| t.trim().eq_ignore_ascii_case(name))));
    if value.split(',').all(|n| has(n.trim())) {
        return;
    }
    headers.append(VARY, HeaderValue::from_static(value));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(HeaderName::from_bytes(k.as_bytes()).unwrap(), HeaderValue::from_str(v).unwrap());
        }
        h
    }

    #[test]
    fn preflight_from_an_allowed_origin_gets_204_with_the_policy() {
        let p = CorsPolicy::new("/api/", "https://a.example", Some("GET, POST"), Some("Content-Type, X-Token"), Some("X-Total"), 600, 0).unwrap();
        let h = req(&[("origin", "https://a.example"), ("access-control-request-method", "POST"), ("access-control-request-headers", "content-type,x-token")]);
        let a = p.preflight(&Method::OPTIONS, &h).unwrap();
        assert_eq!(a.status, 204);
        assert_eq!(a.headers["access-control-allow-origin"], "https://a.example");
        assert_eq!(a.headers["access-control-allow-methods"], "GET, POST");
        assert_eq!(a.headers["access-control-allow-headers"], "content-type, x-token");
        assert_eq!(a.headers["access-control-max-age"], "600");
        let bad_origin = req(&[("origin", "https://evil.example"), ("access-control-request-method", "GET")]);
        assert_eq!(p.preflight(&Method::OPTIONS, &bad_origin).unwrap().status, 403);
        let bad_method = req(&[("origin", "https://a.example"), ("access-control-request-method", "DELETE")]);
        assert_eq!(p.preflight(&Method::OPTIONS, &bad_method).unwrap().status, 403);
        let bad_header = req(&[("origin", "https://a.example"), ("access-control-request-method", "GET"), ("access-control-request-headers", "x-other")]);
        assert_eq!(p.preflight(&Method::OPTIONS, &bad_header).unwrap().status, 403);
        // A plain OPTIONS is the host's.
        assert!(p.preflight(&Method::OPTIONS, &req(&[("origin", "https://a.example")])).is_none());
    }

    #[test]
    fn answers_get_allow_origin_only_for_allowed_origins() {
        let any = CorsPolicy::new("/", "*", None, None, None, 0, 0).unwrap();
        let mut h = HeaderMap::new();
        any.decorate(Some(&HeaderValue::from_static("https://x.example")), &mut h);
        assert_eq!(h["access-control-allow-origin"], "*");
        let creds = CorsPolicy::new("/", "*", None, None, Some("X-A"), 0, CREDENTIALS).unwrap();
        let mut h = HeaderMap::new();
        creds.decorate(Some(&HeaderValue::from_static("https://x.example")), &mut h);
        assert_eq!(h["access-control-allow-origin"], "https://x.example");
        assert_eq!(h["access-control-allow-credentials"], "true");
        assert_eq!(h["access-control-expose-headers"], "X-A");
        assert_eq!(h["vary"], "Origin");
        let listed = CorsPolicy::new("/", "https://a.example", None, None, None, 0, 0).unwrap();
        let mut h = HeaderMap::new();
        listed.decorate(Some(&HeaderValue::from_static("https://b.example")), &mut h);
        assert!(h.get("access-control-allow-origin").is_none());
    }

    #[test]
    fn bad_policies_are_refused() {
        assert!(CorsPolicy::new("api", "*", None, None, None, 0, 0).is_err());
        assert!(CorsPolicy::new("/", "not an origin", None, None, None, 0, 0).is_err());
        assert!(CorsPolicy::new("/", "*", Some("GET, B A D"), None, None, 0, 0).is_err());
        assert!(CorsPolicy::new("/", "*", None, None, None, 0, 8).is_err());
    }

    #[test]
    fn the_longest_prefix_decides() {
        let ps = vec![
            CorsPolicy::new("/", "*", None, None, None, 0, 0).unwrap(),
            CorsPolicy::new("/api", "https://a.example", None, None, None, 0, 0).unwrap(),
        ];
        assert_eq!(find(&ps, "/api/x").unwrap().prefix, "/api");
        assert_eq!(find(&ps, "/apix").unwrap().prefix, "/");
    }
}
