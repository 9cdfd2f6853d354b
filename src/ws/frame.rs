//! Server frames, encoded once with tungstenite's header format: a message sent to many
//! connections shares one buffer.

use super::Kind;
use crate::error::{Error, ErrorKind, Result};
use bytes::{BufMut, Bytes, BytesMut};
use tungstenite::protocol::frame::coding::{Data, OpCode};
use tungstenite::protocol::frame::FrameHeader;

pub(crate) fn data(kind: Kind, payload: &[u8]) -> Bytes {
    let opcode = OpCode::Data(match kind {
        Kind::Text => Data::Text,
        Kind::Binary => Data::Binary,
    });
    let header = FrameHeader { is_final: true, opcode, ..FrameHeader::default() };
    let len = payload.len() as u64;
    let mut out = BytesMut::with_capacity(header.len(len) + payload.len()).writer();
    // Writing into memory cannot fail.
    let _ = header.format(len, &mut out);
    let mut out = out.into_inner();
    out.extend_from_slice(payload);
    out.freeze()
}

/// RFC 6455 §7.4: codes a sender may use, and a reason that fits a control frame.
pub(crate) fn check_close(code: u16, reason: &str) -> Result<()> {
    let allowed = matches!(code, 1000..=1003 | 1007..=1014 | 3000..=4999);
    if !allowed {
        return Err(Error::new(ErrorKind::InvalidArg, format!("close code {code} may not be sent (use 1000-1003, 1007-1014 or 3000-4999)")));
    }
    if reason.len() > 123 {
        return Err(Error::new(ErrorKind::InvalidArg, format!("close reason is {} bytes; at most 123 fit a close frame", reason.len())));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_have_the_rfc_header_and_the_payload_once() {
        assert_eq!(&data(Kind::Text, b"hi")[..], &[0x81, 0x02, b'h', b'i']);
        let big = data(Kind::Binary, &[7u8; 300]);
        assert_eq!(&big[..4], &[0x82, 126, 0x01, 0x2c]);
        assert_eq!(big.len(), 4 + 300);
        assert!(check_close(1000, "bye").is_ok());
        assert!(check_close(1005, "").is_err());
        assert!(check_close(4000, &"x".repeat(124)).is_err());
    }
}
