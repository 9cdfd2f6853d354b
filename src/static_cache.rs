//! Small files of a static mount kept in memory with their header values, so that a hit
//! costs one `fstatat` instead of open + stat + read + close, and no formatting of dates,
//! tags or types. Every hit is revalidated: the file's identity now (device, inode, size,
//! mtime, ctime, as the path resolves at this moment) must equal the identity it had when
//! it was read, or the request takes the ordinary path, which opens the file beneath the
//! folder again and refreshes the entry. A file changed on disk is therefore served fresh
//! on the next request.
//!
//! Safety of the shortcut: an entry is only made from a file the ordinary path opened with
//! its checks (openat2 RESOLVE_BENEATH, dotfiles, …). If a path later resolves elsewhere
//! (a folder swapped for a symlink out of the mount), it reaches another inode, the
//! identities differ, and the ordinary path decides; reaching the very same inode again
//! can only yield the bytes that were served before.
//!
//! A file whose status changed within `SETTLE` of its reading is not kept: a second write
//! inside the file system's timestamp granularity (coarse clock ticks; one or two seconds
//! on some file systems) could leave size and times unchanged (git's "racily clean" rule).
//! Linux only (the mount's folder descriptor); elsewhere every request takes the ordinary path.
#![cfg_attr(not(target_os = "linux"), allow(dead_code, unused_imports))]

use bytes::Bytes;
use http::header::{HeaderMap, HeaderValue};
use parking_lot::Mutex;
use std::fs::{File, Metadata};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

/// Files up to this size are kept (the size the ordinary path reads at once).
pub(crate) const MAX_FILE: u64 = 64 * 1024;
/// Bytes of file contents kept per mount; past it, entries are dropped to make room.
const MAX_BYTES: usize = 16 << 20;
const SETTLE: Duration = Duration::from_secs(2);

/// What identifies one version of a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Ident {
    dev: u64,
    ino: u64,
    size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

/// The header values of a file, computed once per version.
#[derive(Clone)]
pub(crate) struct Facts {
    pub len: u64,
    pub mtime: SystemTime,
    pub ctype: HeaderValue,
    pub compressible: bool,
    pub last_modified: Option<HeaderValue>,
    /// The plain tag (no coding suffix).
    pub etag: HeaderValue,
}

pub(crate) struct Small {
    ident: Ident,
    pub body: Bytes,
    pub facts: Facts,
    /// The answer's headers for the whole file as it is, without and with
    /// `Vary: Accept-Encoding` (`static_http::file_headers`): a hit clones one.
    pub headers: [HeaderMap; 2],
}

#[derive(Default)]
struct Inner {
    map: foldhash::HashMap<String, Arc<Small>>,
    bytes: usize,
}

#[derive(Default)]
pub(crate) struct SmallFiles {
    inner: Mutex<Inner>,
}

#[cfg(target_os = "linux")]
pub(crate) fn ident(meta: &Metadata) -> Ident {
    use std::os::unix::fs::MetadataExt;
    Ident {
        dev: meta.dev(),
        ino: meta.ino(),
        size: meta.size(),
        mtime: (meta.mtime(), meta.mtime_nsec()),
        ctime: (meta.ctime(), meta.ctime_nsec()),
    }
}

/// Whether the version `meta` describes has settled long enough to be kept.
#[cfg(target_os = "linux")]
pub(crate) fn settled(meta: &Metadata) -> bool {
    use std::os::unix::fs::MetadataExt;
    let now = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default();
    let changed = Duration::new(meta.ctime().max(0) as u64, meta.ctime_nsec().clamp(0, 999_999_999) as u32)
        .max(Duration::new(meta.mtime().max(0) as u64, meta.mtime_nsec().clamp(0, 999_999_999) as u32));
    now > changed + SETTLE
}

/// The identity of what `rel` names beneath `dir` now (symlinks followed, as the open does).
#[cfg(target_os = "linux")]
fn stat_at(dir: &File, rel: &str) -> Option<Ident> {
    use std::os::fd::AsRawFd;
    // The NUL-terminated path on the stack: no allocation per hit for the usual name.
    let mut buf = [0u8; 256];
    let owned;
    let path: &std::ffi::CStr = if rel.len() < buf.len() {
        buf[..rel.len()].copy_from_slice(rel.as_bytes());
        std::ffi::CStr::from_bytes_until_nul(&buf).ok()?
    } else {
        owned = std::ffi::CString::new(rel).ok()?;
        &owned
    };
    // A NUL inside the name would shorten it: such a name never reaches here (the
    // mount's checks refuse NUL), and it would not be the kept name.
    if path.count_bytes() != rel.len() {
        return None;
    }
    let mut st = std::mem::MaybeUninit::<libc::stat>::uninit();
    // SAFETY: a valid directory descriptor, a NUL-terminated path, and a stat buffer the
    // kernel fills completely on success.
    let rc = unsafe { libc::fstatat(dir.as_raw_fd(), path.as_ptr(), st.as_mut_ptr(), 0) };
    if rc != 0 {
        return None;
    }
    // SAFETY: filled by the successful call above.
    let st = unsafe { st.assume_init() };
    if st.st_mode & libc::S_IFMT != libc::S_IFREG {
        return None;
    }
    Some(Ident {
        dev: st.st_dev as u64,
        ino: st.st_ino as u64,
        size: st.st_size as u64,
        mtime: (st.st_mtime as i64, st.st_mtime_nsec as i64),
        ctime: (st.st_ctime as i64, st.st_ctime_nsec as i64),
    })
}

impl SmallFiles {
    /// The kept version of `rel`, if the file beneath `dir` is still that version.
    #[cfg(target_os = "linux")]
    pub fn get(&self, dir: &File, rel: &str) -> Option<Arc<Small>> {
        let hit = self.inner.lock().map.get(rel).cloned()?;
        if stat_at(dir, rel) == Some(hit.ident) {
            return Some(hit);
        }
        // Changed, gone or refused now: the ordinary path answers (and refreshes it).
        let mut inner = self.inner.lock();
        if inner.map.get(rel).is_some_and(|e| Arc::ptr_eq(e, &hit)) {
            inner.map.remove(rel);
            inner.bytes -= hit.body.len();
        }
        None
    }

    /// Keeps `body` as the version `ident` of `rel`, with its answer headers.
    pub fn put(&self, rel: &str, ident: Ident, body: Bytes, facts: Facts, headers: [HeaderMap; 2]) {
        let mut inner = self.inner.lock();
        let inner = &mut *inner;
        if let Some(old) = inner.map.remove(rel) {
            inner.bytes -= old.body.len();
        }
        // Make room by dropping whatever comes first; a bounded, rare cost.
        while inner.bytes + body.len() > MAX_BYTES {
            let Some(k) = inner.map.keys().next().cloned() else { break };
            if let Some(old) = inner.map.remove(&k) {
                inner.bytes -= old.body.len();
            }
        }
        inner.bytes += body.len();
        inner.map.insert(rel.to_owned(), Arc::new(Small { ident, body, facts, headers }));
    }

    #[cfg(test)]
    fn held(&self) -> (usize, usize) {
        let inner = self.inner.lock();
        (inner.map.len(), inner.bytes)
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    fn facts() -> Facts {
        Facts {
            len: 0,
            mtime: SystemTime::UNIX_EPOCH,
            ctype: HeaderValue::from_static("text/plain"),
            compressible: true,
            last_modified: None,
            etag: HeaderValue::from_static("\"x\""),
        }
    }

    #[test]
    fn a_hit_needs_the_same_version_and_the_memory_stays_bounded() {
        let dir = std::env::temp_dir().join(format!("ember-small-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("a.txt"), b"one").unwrap();
        let root = File::open(&dir).unwrap();
        let files = SmallFiles::default();
        let meta = std::fs::metadata(dir.join("a.txt")).unwrap();
        files.put("a.txt", ident(&meta), Bytes::from_static(b"one"), facts(), Default::default());
        assert_eq!(&files.get(&root, "a.txt").unwrap().body[..], b"one");
        // Another version (a different size) is not this entry, and the entry goes.
        std::fs::write(dir.join("a.txt"), b"three").unwrap();
        assert!(files.get(&root, "a.txt").is_none());
        assert_eq!(files.held(), (0, 0));
        // So does a file that is gone.
        let meta = std::fs::metadata(dir.join("a.txt")).unwrap();
        files.put("a.txt", ident(&meta), Bytes::from_static(b"three"), facts(), Default::default());
        std::fs::remove_file(dir.join("a.txt")).unwrap();
        assert!(files.get(&root, "a.txt").is_none());
        // The byte cap holds whatever is put.
        let big = Bytes::from(vec![b'x'; MAX_FILE as usize]);
        for i in 0..(MAX_BYTES / big.len() + 8) {
            files.put(&format!("f{i}"), ident(&meta), big.clone(), facts(), Default::default());
        }
        let (n, bytes) = files.held();
        assert!(bytes <= MAX_BYTES && n == MAX_BYTES / big.len(), "{n} entries, {bytes} bytes");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
