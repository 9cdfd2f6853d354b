//! Checks on what the host passes: nulls, lengths, UTF-8. Every exported function reads
//! host pointers only through these.

use crate::error::{Error, ErrorKind, Result};
use std::ffi::CStr;
use std::os::raw::c_char;

pub(crate) fn null(what: &str) -> Error {
    Error::new(ErrorKind::Null, format!("{what} must not be NULL"))
}

pub(crate) fn non_null<'a, T>(p: *const T, what: &str) -> Result<&'a T> {
    // SAFETY: the host promises a non-NULL pointer is valid for the call.
    unsafe { p.as_ref() }.ok_or_else(|| null(what))
}

/// Writes through an output pointer, or fails if it is NULL.
pub(crate) fn write<T>(p: *mut T, what: &str, value: T) -> Result<()> {
    if p.is_null() {
        return Err(null(what));
    }
    // SAFETY: non-NULL output pointers are the host's promise of writable memory.
    unsafe { p.write(value) };
    Ok(())
}

/// Writes the first `size` bytes of a struct whose first field is its own `size_t size`
/// (so callers built against an older, shorter struct are safe); `size` must cover at
/// least that field.
pub(crate) fn write_sized<T: Copy>(p: *mut T, size: usize, what: &str, value: T) -> Result<()> {
    if p.is_null() {
        return Err(null(what));
    }
    let full = std::mem::size_of::<T>();
    if size < std::mem::size_of::<usize>() {
        return Err(Error::new(ErrorKind::InvalidArg, format!("{what}: size {size} is too small (this library fills {full} bytes)")));
    }
    let n = size.min(full);
    // SAFETY: the host promises `size` writable bytes at `p`; we write at most that many,
    // from a value of ours that has `full` ≥ `n` bytes.
    unsafe { std::ptr::copy_nonoverlapping((&value as *const T).cast::<u8>(), p.cast::<u8>(), n) };
    Ok(())
}

/// A NUL-terminated UTF-8 string argument.
pub(crate) fn c_str<'a>(p: *const c_char, what: &str) -> Result<&'a str> {
    if p.is_null() {
        return Err(null(what));
    }
    // SAFETY: non-NULL string arguments are NUL-terminated by contract.
    let bytes = unsafe { CStr::from_ptr(p) }.to_bytes();
    std::str::from_utf8(bytes).map_err(|_| Error::new(ErrorKind::InvalidArg, format!("{what} is not valid UTF-8")))
}

/// A pointer + length buffer; NULL is fine when the length is 0.
pub(crate) fn bytes<'a>(p: *const u8, len: usize, what: &str) -> Result<&'a [u8]> {
    if len == 0 {
        return Ok(&[]);
    }
    if p.is_null() {
        return Err(Error::new(ErrorKind::Null, format!("{what} is NULL but its length is {len}")));
    }
    if len > isize::MAX as usize {
        return Err(Error::new(ErrorKind::InvalidArg, format!("{what} length {len} is too large")));
    }
    // SAFETY: the host promises `len` readable bytes at a non-NULL `p`.
    Ok(unsafe { std::slice::from_raw_parts(p, len) })
}
