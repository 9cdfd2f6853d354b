//! Prepared answers: a status, headers and body checked and built once, then sent to any
//! number of requests. A host that answers many requests with the same response (a fixed
//! JSON document, a health reply) pays for parsing and validating it once; each answer
//! then costs a copy of the header map (hyper takes it) and a reference to the body.
//!
//! Prepared answers live in a table of generation-checked handles, like requests: a
//! freed or forged handle is an error, never a dangling pointer.

use crate::error::{Error, ErrorKind, Result};
use crate::request::Answer;
use crate::response;
use bytes::Bytes;
use http::header::{HeaderValue, CONTENT_TYPE};
use http::HeaderMap;
use parking_lot::Mutex;
use std::sync::Arc;

/// A checked answer that can be sent many times.
pub struct Prepared {
    status: u16,
    headers: HeaderMap,
    body: Bytes,
    declared_len: Option<u64>,
    marked: bool,
}

impl Prepared {
    /// Checks status and header block as a one-off answer would.
    pub fn new(status: u16, header_block: &[u8], body: Bytes) -> Result<Prepared> {
        let a = response::answer(status, header_block, body)?;
        Ok(Prepared { status: a.status, headers: a.headers, body: a.body, declared_len: a.declared_len, marked: a.marked })
    }

    /// One request's copy: the map is copied (hyper keeps it), the body is shared.
    pub fn answer(&self) -> Answer {
        let headers = response::roomy_copy(&self.headers);
        Answer { declared_len: self.declared_len, marked: self.marked, ..Answer::new(self.status, headers, self.body.clone()) }
    }
}

/// A small answer: status, an optional Content-Type (empty = none) and a body.
pub fn small(status: u16, content_type: &[u8], body: Bytes) -> Result<Answer> {
    response::check_status(status)?;
    let mut headers = HeaderMap::with_capacity(response::MAP_ROOM);
    if !content_type.is_empty() {
        headers.insert(CONTENT_TYPE, content_type_value(content_type)?);
    }
    Ok(Answer { marked: false, ..Answer::new(status, headers, body) })
}

thread_local! {
    // The last Content-Type per thread: hosts send one or two, and a clone shares its bytes.
    static LAST_TYPE: std::cell::RefCell<Option<(Box<[u8]>, HeaderValue)>> = const { std::cell::RefCell::new(None) };
}

fn content_type_value(raw: &[u8]) -> Result<HeaderValue> {
    let hit = LAST_TYPE.with(|c| c.borrow().as_ref().filter(|(k, _)| &k[..] == raw).map(|(_, v)| v.clone()));
    if let Some(v) = hit {
        return Ok(v);
    }
    let v = HeaderValue::from_bytes(raw).map_err(|_| {
        Error::new(ErrorKind::InvalidArg, format!("content type {:?} is not a valid header value", String::from_utf8_lossy(raw)))
    })?;
    LAST_TYPE.with(|c| *c.borrow_mut() = Some((raw.into(), v.clone())));
    Ok(v)
}

/// Handles are (generation << 32) | (index + 1): never 0, and a freed slot's next
/// occupant has another generation.
#[derive(Default)]
struct Table {
    slots: Vec<(u32, Option<Arc<Prepared>>)>,
    free: Vec<u32>,
}

static TABLE: Mutex<Table> = Mutex::new(Table { slots: Vec::new(), free: Vec::new() });

fn invalid(id: u64) -> Error {
    Error::new(ErrorKind::InvalidHandle, format!("{id:#x} is not a live prepared answer (freed, or never made by ember_answer_new)"))
}

fn split(id: u64) -> Option<(usize, u32)> {
    // checked_sub, not then_some: its argument is computed even for the 0 handle.
    let index = ((id & 0xFFFF_FFFF) as usize).checked_sub(1)?;
    Some((index, (id >> 32) as u32))
}

/// Keeps `p` and returns its handle.
pub fn insert(p: Prepared) -> Result<u64> {
    let mut t = TABLE.lock();
    let index = match t.free.pop() {
        Some(i) => i,
        None => {
            let i = u32::try_from(t.slots.len()).ok().filter(|i| *i < u32::MAX).ok_or_else(|| {
                Error::new(ErrorKind::Runtime, "too many prepared answers are alive (free some with ember_answer_free)")
            })?;
            t.slots.push((0, None));
            i
        }
    };
    let slot = &mut t.slots[index as usize];
    slot.0 = slot.0.wrapping_add(1).max(1);
    slot.1 = Some(Arc::new(p));
    Ok((slot.0 as u64) << 32 | (index as u64 + 1))
}

/// The prepared answer behind a live handle.
pub fn get(id: u64) -> Result<Arc<Prepared>> {
    let (index, generation) = split(id).ok_or_else(|| invalid(id))?;
    let t = TABLE.lock();
    match t.slots.get(index) {
        Some((g, Some(p))) if *g == generation => Ok(p.clone()),
        _ => Err(invalid(id)),
    }
}

/// Ends a handle. Answers already sent with it are unaffected (they share the body).
pub fn remove(id: u64) -> Result<()> {
    let (index, generation) = split(id).ok_or_else(|| invalid(id))?;
    let gone = {
        let mut t = TABLE.lock();
        let gone = match t.slots.get_mut(index) {
            Some((g, p @ Some(_))) if *g == generation => p.take(),
            _ => return Err(invalid(id)),
        };
        t.free.push(index as u32);
        gone
    };
    drop(gone); // outside the lock: the last reference frees the body
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_freed_handle_is_refused_and_its_slot_gets_a_new_generation() {
        let a = insert(Prepared::new(200, b"Content-Type: text/plain\r\n", Bytes::from_static(b"hi")).unwrap()).unwrap();
        assert_eq!(get(a).unwrap().answer().body, Bytes::from_static(b"hi"));
        remove(a).unwrap();
        assert_eq!(remove(a).unwrap_err().kind, ErrorKind::InvalidHandle);
        assert_eq!(get(a).err().unwrap().kind, ErrorKind::InvalidHandle);
        let b = insert(Prepared::new(204, b"", Bytes::new()).unwrap()).unwrap();
        assert_ne!(a, b);
        assert_eq!(get(0).err().unwrap().kind, ErrorKind::InvalidHandle);
        remove(b).unwrap();
    }

    #[test]
    fn bad_status_header_or_content_type_is_refused() {
        assert_eq!(Prepared::new(42, b"", Bytes::new()).err().unwrap().kind, ErrorKind::InvalidArg);
        assert_eq!(Prepared::new(200, b"no colon", Bytes::new()).err().unwrap().kind, ErrorKind::InvalidArg);
        assert_eq!(small(200, b"text/plain\r\nX: 1", Bytes::new()).err().unwrap().kind, ErrorKind::InvalidArg);
        assert_eq!(small(200, b"text/plain", Bytes::new()).unwrap().headers[CONTENT_TYPE], "text/plain");
    }
}
