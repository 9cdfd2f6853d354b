//! Accept-Encoding (RFC 9110, 12.5.3): the weight the client gives each of our codings,
//! and the best of those a server offers.

use super::Coding;
use http::header::HeaderValue;

/// Our codings in the order that decides a tie of weights, best first. zstd first: at the
/// level used here (5) its answers are the size of gzip 6's for 27 to 45 % of the CPU of
/// gzip 6 or brotli 5, and the client decodes them fastest; a server offers it only when
/// its operator asked for it (README, compression: the figures). Then brotli (6 to 10 %
/// smaller than zstd 5, for about gzip's CPU), then gzip.
const TIE_ORDER: [Coding; 3] = [Coding::Zstd, Coding::Brotli, Coding::Gzip];

/// The coding the client likes best among `offered` (a bit set), from its Accept-Encoding;
/// None when it accepts none of them (or sent no Accept-Encoding: then only identity is safe).
pub fn negotiate(accept: Option<&HeaderValue>, offered: u32) -> Option<Coding> {
    Accepted::parse(accept).best(offered)
}

/// What an Accept-Encoding says of gzip, brotli and zstd: their weights in thousandths (0:
/// not acceptable), `*` applied. Parsed once per request however many choices it decides.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Accepted {
    gzip: u16,
    br: u16,
    zstd: u16,
}

impl Accepted {
    pub fn parse(accept: Option<&HeaderValue>) -> Accepted {
        let Some(accept) = accept else { return Accepted::default() };
        // A value naming none of our codings nor `*` (the usual "identity") has none of
        // these letters: no parsing.
        if !accept.as_bytes().iter().any(|&c| matches!(c | 0x20, b'g' | b'b' | b'z' | b'*')) {
            return Accepted::default();
        }
        let Ok(accept) = accept.to_str() else { return Accepted::default() };
        let (mut gzip, mut br, mut zstd, mut star) = (None::<u16>, None::<u16>, None::<u16>, None::<u16>);
        for item in accept.split(',') {
            let mut parts = item.split(';');
            let token = parts.next().unwrap_or("").trim();
            let mut q = Some(1000);
            for p in parts {
                let p = p.trim();
                if let Some(v) = p.strip_prefix("q=").or_else(|| p.strip_prefix("Q=")) {
                    q = qvalue(v.trim());
                }
            }
            // A malformed weight: the item says nothing reliable.
            let Some(q) = q else { continue };
            let slot = if token.eq_ignore_ascii_case("gzip") || token.eq_ignore_ascii_case("x-gzip") {
                &mut gzip
            } else if token.eq_ignore_ascii_case("br") {
                &mut br
            } else if token.eq_ignore_ascii_case("zstd") {
                &mut zstd
            } else if token == "*" {
                &mut star
            } else {
                continue;
            };
            // The first mention counts (duplicates are malformed; be predictable).
            slot.get_or_insert(q);
        }
        let or_star = |w: Option<u16>| w.or(star).unwrap_or(0);
        Accepted { gzip: or_star(gzip), br: or_star(br), zstd: or_star(zstd) }
    }

    fn weight(self, coding: Coding) -> u16 {
        match coding {
            Coding::Gzip => self.gzip,
            Coding::Brotli => self.br,
            Coding::Zstd => self.zstd,
        }
    }

    /// The best of `offered` (a bit set) for this client: the highest weight, ties by
    /// `TIE_ORDER`.
    pub fn best(self, offered: u32) -> Option<Coding> {
        let mut best: Option<(Coding, u16)> = None;
        for c in TIE_ORDER {
            let w = if offered & c.bit() == 0 { 0 } else { self.weight(c) };
            if w > 0 && best.is_none_or(|(_, bw)| w > bw) {
                best = Some((c, w));
            }
        }
        best.map(|(c, _)| c)
    }

    /// The acceptable codings among `offered`, best first (the order `best` would pick
    /// them in as each is taken away): the precompressed siblings of static files.
    #[cfg_attr(not(feature = "static"), allow(dead_code))]
    pub fn ranked(self, offered: u32) -> impl Iterator<Item = Coding> {
        let mut left = offered;
        std::iter::from_fn(move || {
            let c = self.best(left)?;
            left &= !c.bit();
            Some(c)
        })
    }
}

/// An RFC 9110 weight ("0", "0.5", "1.000") in thousandths; None when malformed. By hand:
/// float parsing would pull tens of KB of tables into the library for three digits.
fn qvalue(v: &str) -> Option<u16> {
    let (int, frac) = v.split_once('.').unwrap_or((v, ""));
    if frac.len() > 3 || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let mut thousandths = 0u16;
    for (i, b) in frac.bytes().chain(std::iter::repeat(b'0')).take(3).enumerate() {
        thousandths += u16::from(b - b'0') * [100, 10, 1][i];
    }
    match int {
        "0" => Some(thousandths),
        "1" if thousandths == 0 => Some(1000),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compress::{BR, GZIP, ZSTD};

    fn hv(s: &'static str) -> HeaderValue {
        HeaderValue::from_static(s)
    }

    #[test]
    fn negotiation_honours_q_values_and_prefers_brotli_to_gzip_on_a_tie() {
        let both = GZIP | BR;
        assert_eq!(negotiate(Some(&hv("gzip, deflate, br")), both), Some(Coding::Brotli));
        assert_eq!(negotiate(Some(&hv("gzip;q=1.0, br;q=0.5")), both), Some(Coding::Gzip));
        assert_eq!(negotiate(Some(&hv("br;q=0, gzip;q=0.1")), both), Some(Coding::Gzip));
        assert_eq!(negotiate(Some(&hv("br;q=0, gzip;q=0")), both), None);
        assert_eq!(negotiate(Some(&hv("*")), both), Some(Coding::Brotli));
        assert_eq!(negotiate(Some(&hv("*;q=0.5, br;q=0")), both), Some(Coding::Gzip));
        assert_eq!(negotiate(Some(&hv("identity")), both), None);
        assert_eq!(negotiate(Some(&hv("gzip, br")), GZIP), Some(Coding::Gzip));
        assert_eq!(negotiate(Some(&hv("X-GZIP")), both), Some(Coding::Gzip));
        assert_eq!(negotiate(Some(&hv("BR;Q=0.9, GZIP;Q=0.8")), both), Some(Coding::Brotli));
        assert_eq!(negotiate(Some(&hv("identity, deflate")), both), None);
        assert_eq!(negotiate(None, both), None);
        assert_eq!(negotiate(Some(&hv("br")), GZIP), None);
        assert_eq!(negotiate(Some(&hv("br;q=abc, gzip")), both), Some(Coding::Gzip));
        assert_eq!(negotiate(Some(&hv("x-gzip")), both), Some(Coding::Gzip));
        assert_eq!(negotiate(Some(&hv("br;q=0.001, gzip;q=0.0009")), both), Some(Coding::Brotli));
        assert_eq!(negotiate(Some(&hv("br;q=1.5, gzip;q=0.2")), both), Some(Coding::Gzip));
        assert_eq!(qvalue("0.5"), Some(500));
        assert_eq!(qvalue("1.000"), Some(1000));
        assert_eq!(qvalue("1.001"), None);
        assert_eq!(qvalue("0."), Some(0));
        assert_eq!(qvalue(".5"), None);
    }

    #[test]
    fn zstd_wins_a_tie_and_loses_to_a_higher_weight() {
        let all = GZIP | BR | ZSTD;
        // What browsers send today: every weight 1, so the tie order decides.
        assert_eq!(negotiate(Some(&hv("gzip, deflate, br, zstd")), all), Some(Coding::Zstd));
        assert_eq!(negotiate(Some(&hv("zstd")), all), Some(Coding::Zstd));
        assert_eq!(negotiate(Some(&hv("ZSTD")), all), Some(Coding::Zstd));
        assert_eq!(negotiate(Some(&hv("zstd;q=0.5, gzip")), all), Some(Coding::Gzip));
        assert_eq!(negotiate(Some(&hv("zstd;q=0.5, br;q=0.6")), all), Some(Coding::Brotli));
        assert_eq!(negotiate(Some(&hv("zstd;q=0")), all), None);
        assert_eq!(negotiate(Some(&hv("zstd;q=0, gzip;q=0.1")), all), Some(Coding::Gzip));
        assert_eq!(negotiate(Some(&hv("*")), all), Some(Coding::Zstd));
        assert_eq!(negotiate(Some(&hv("*, zstd;q=0")), all), Some(Coding::Brotli));
        // Not offered (the server's mask, or a build without the feature): never chosen.
        assert_eq!(negotiate(Some(&hv("zstd")), GZIP | BR), None);
        assert_eq!(negotiate(Some(&hv("gzip, br, zstd")), GZIP | BR), Some(Coding::Brotli));
        let ranked: Vec<Coding> = Accepted::parse(Some(&hv("gzip;q=0.9, zstd;q=0.5, br"))).ranked(all).collect();
        assert_eq!(ranked, [Coding::Brotli, Coding::Gzip, Coding::Zstd]);
        let ranked: Vec<Coding> = Accepted::parse(Some(&hv("gzip, br, zstd"))).ranked(GZIP | ZSTD).collect();
        assert_eq!(ranked, [Coding::Zstd, Coding::Gzip]);
        assert_eq!(Accepted::parse(Some(&hv("identity"))).ranked(all).count(), 0);
    }
}
