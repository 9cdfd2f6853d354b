//! The encoders of the codings this build has (cargo features `gzip`, `brotli`, `zstd`),
//! streaming and whole-body.

use super::Coding;
use bytes::Bytes;
#[cfg(any(feature = "gzip", feature = "brotli", feature = "zstd"))]
use std::io::Write;

#[cfg(feature = "gzip")]
const GZIP_LEVEL: u32 = 6;
/// Brotli's quality 5 costs about what gzip 6 does and compresses better; 11 is for
/// files compressed ahead of time (the `.br` siblings of static files).
#[cfg(feature = "brotli")]
const BR_QUALITY: u32 = 5;
#[cfg(feature = "brotli")]
const BR_WINDOW: u32 = 22;
/// zstd's level 5: on 100 KB JSON and HTML answers it comes out the size of gzip 6's
/// (0 to 1.2 % larger on four bodies of five, 5 % on the fifth) for 27 to 40 % of gzip 6's
/// CPU, and decodes up to twice as fast as gzip; levels 1 to 4 cost less again but are 3 to 28 %
/// larger than gzip, 6 and up cost more for a few percent (README, compression;
/// `bench/results/compression.md`). Its window for a stream of unknown length is 2 MiB, within the
/// 8 MiB that RFC 8878 asks HTTP decoders to accept.
#[cfg(feature = "zstd")]
pub(crate) const ZSTD_LEVEL: i32 = 5;

/// A streaming encoder: feed chunks, take what came out, finish.
pub(crate) enum Encoder {
    #[cfg(feature = "gzip")]
    Gzip(flate2::write::GzEncoder<Vec<u8>>),
    #[cfg(feature = "brotli")]
    Brotli(Box<brotli::CompressorWriter<Vec<u8>>>),
    #[cfg(feature = "zstd")]
    Zstd(Box<zstd::stream::write::Encoder<'static, Vec<u8>>>),
    /// Never made: a build with some coding left out still matches exhaustively.
    #[cfg(not(all(feature = "gzip", feature = "brotli", feature = "zstd")))]
    #[allow(dead_code)]
    Unbuilt(std::convert::Infallible),
}

fn not_built(coding: Coding) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::Unsupported, format!("this build cannot compress with {}", coding.token()))
}

impl Encoder {
    /// An encoder for `coding`, if this build has one (negotiation offers only those).
    pub fn new(coding: Coding) -> std::io::Result<Encoder> {
        match coding {
            #[cfg(feature = "gzip")]
            Coding::Gzip => Ok(Encoder::Gzip(flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::new(GZIP_LEVEL)))),
            #[cfg(feature = "brotli")]
            Coding::Brotli => Ok(Encoder::Brotli(Box::new(brotli::CompressorWriter::new(Vec::new(), 16 * 1024, BR_QUALITY, BR_WINDOW)))),
            #[cfg(feature = "zstd")]
            Coding::Zstd => Ok(Encoder::Zstd(Box::new(zstd::stream::write::Encoder::new(Vec::new(), ZSTD_LEVEL)?))),
            #[allow(unreachable_patterns)]
            other => Err(not_built(other)),
        }
    }

    /// Compresses `data`; returns the bytes the encoder produced so far (maybe none).
    #[allow(unused_variables, unreachable_code)]
    pub fn push(&mut self, data: &[u8]) -> std::io::Result<Bytes> {
        let out: &mut Vec<u8> = match self {
            #[cfg(feature = "gzip")]
            Encoder::Gzip(e) => {
                e.write_all(data)?;
                e.get_mut()
            }
            #[cfg(feature = "brotli")]
            Encoder::Brotli(e) => {
                e.write_all(data)?;
                e.get_mut()
            }
            #[cfg(feature = "zstd")]
            Encoder::Zstd(e) => {
                e.write_all(data)?;
                e.get_mut()
            }
            #[cfg(not(all(feature = "gzip", feature = "brotli", feature = "zstd")))]
            Encoder::Unbuilt(never) => match *never {},
        };
        Ok(Bytes::from(std::mem::take(out)))
    }

    /// The rest of the output, the trailer included.
    pub fn finish(self) -> std::io::Result<Bytes> {
        match self {
            #[cfg(feature = "gzip")]
            Encoder::Gzip(e) => e.finish().map(Bytes::from),
            #[cfg(feature = "brotli")]
            Encoder::Brotli(e) => Ok(Bytes::from(e.into_inner())),
            #[cfg(feature = "zstd")]
            Encoder::Zstd(e) => e.finish().map(Bytes::from),
            #[cfg(not(all(feature = "gzip", feature = "brotli", feature = "zstd")))]
            Encoder::Unbuilt(never) => match never {},
        }
    }
}

/// Compresses a whole body at once.
pub fn compress_now(coding: Coding, data: &[u8]) -> std::io::Result<Bytes> {
    // A whole body's length is known: zstd then sizes its window and tables to it (less
    // memory and setup for a small answer) and writes the length into the frame.
    #[cfg(feature = "zstd")]
    if coding == Coding::Zstd {
        return zstd::bulk::compress(data, ZSTD_LEVEL).map(Bytes::from);
    }
    let mut e = Encoder::new(coding)?;
    let head = e.push(data)?;
    let tail = e.finish()?;
    if head.is_empty() {
        return Ok(tail);
    }
    let mut all = Vec::with_capacity(head.len() + tail.len());
    all.extend_from_slice(&head);
    all.extend_from_slice(&tail);
    Ok(Bytes::from(all))
}
