//! Static mounts: a URL prefix mapped to a folder, and the one safe way from a request
//! path to an open file inside it. Each percent-decoded segment is checked (no "." or
//! "..", no encoded slash or backslash, no NUL, no drive letter or stream name, nothing
//! still percent-encoded after one decoding, no dotfile unless allowed) and the file is
//! opened beneath the folder: on Linux with openat2(RESOLVE_BENEATH), so that no
//! symlink leads out of it; elsewhere the resolved path must still lie in the folder.
//! The HTTP side (304, ranges, encodings) is `static_serve`.

use crate::error::{Error, ErrorKind, Result};
use crate::static_cache::{Small, SmallFiles};
use http::header::HeaderValue;
use std::borrow::Cow;
use std::fs::File;
use std::path::{Path, PathBuf};

/// `EMBER_STATIC_INDEX`: a request for a folder ("/docs/") gets its `index.html`.
pub(crate) const INDEX: u32 = 1;
/// `EMBER_STATIC_PRECOMPRESSED`: `name.zst` / `name.br` / `name.gz` beside a file are sent instead of
/// it to clients that accept that encoding.
pub(crate) const PRECOMPRESSED: u32 = 2;
/// `EMBER_STATIC_SPA`: a path under the mount that names no file gets the mount's
/// `index.html` (single-page applications that route in the browser).
pub(crate) const SPA: u32 = 4;
/// `EMBER_STATIC_DOTFILES`: names starting with '.' are served (refused by default).
pub(crate) const DOTFILES: u32 = 8;
pub(crate) const ALL_FLAGS: u32 = INDEX | PRECOMPRESSED | SPA | DOTFILES;

pub struct Mount {
    /// "/static" (no trailing slash), or "" for the root.
    pub prefix: String,
    pub root: PathBuf,
    #[cfg(target_os = "linux")]
    root_dir: File,
    pub flags: u32,
    pub cache_control: Option<HeaderValue>,
    /// Small files kept in memory, revalidated on every hit (`static_cache`; Linux only:
    /// the revalidation is an fstatat on `root_dir`).
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    pub(crate) small: SmallFiles,
}

impl std::fmt::Debug for Mount {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Mount({:?} -> {:?}, flags {:#x})", self.prefix, self.root, self.flags)
    }
}

/// Why a path is not served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// Nothing there (or hidden: dotfiles): 404.
    NotFound,
    /// An attempt to leave the folder or a name no file can have: 403.
    Forbidden,
}

/// What a request path names under a mount.
pub(crate) struct Target<'a> {
    /// Relative to the mount's folder, '/'-separated; "" for the folder itself. Borrowed
    /// from the request when it needed no decoding.
    pub rel: Cow<'a, str>,
    /// The request asked for a folder (ended in '/'); the mount itself without its
    /// slash does not, so that it is redirected and relative links work.
    pub dir: bool,
}

impl Mount {
    pub fn new(prefix: &str, folder: &str, flags: u32, cache_control: Option<&str>) -> Result<Mount> {
        if !prefix.starts_with('/') {
            return Err(Error::new(ErrorKind::InvalidArg, format!("static prefix {prefix:?} must start with '/'")));
        }
        if flags & !ALL_FLAGS != 0 {
            return Err(Error::new(ErrorKind::InvalidArg, format!("static flags {flags:#x} include unknown bits")));
        }
        let root = std::fs::canonicalize(folder)
            .map_err(|e| Error::new(ErrorKind::InvalidArg, format!("static folder {folder:?}: {e}")))?;
        if !root.is_dir() {
            return Err(Error::new(ErrorKind::InvalidArg, format!("static folder {folder:?} is not a folder")));
        }
        let cache_control = match cache_control {
            None => None,
            Some(v) => Some(HeaderValue::from_str(v.trim()).map_err(|_| {
                Error::new(ErrorKind::InvalidArg, format!("Cache-Control value {v:?} is not a valid header value"))
            })?),
        };
        #[cfg(target_os = "linux")]
        let root_dir = File::open(&root).map_err(|e| Error::new(ErrorKind::InvalidArg, format!("static folder {folder:?}: {e}")))?;
        Ok(Mount {
            prefix: prefix.trim_end_matches('/').to_owned(),
            root,
            #[cfg(target_os = "linux")]
            root_dir,
            flags,
            cache_control,
            small: SmallFiles::default(),
        })
    }

    /// The part of `path` under this mount (starting with '/' or empty), if it is one.
    pub fn claims<'a>(&self, path: &'a str) -> Option<&'a str> {
        let rest = path.strip_prefix(self.prefix.as_str())?;
        (rest.is_empty() || rest.starts_with('/')).then_some(rest)
    }

    /// Checks the raw (percent-encoded) rest of a request path.
    pub(crate) fn target<'a>(&self, rest: &'a str) -> std::result::Result<Target<'a>, Refusal> {
        if let Some(rel) = plain(rest) {
            return Ok(Target { dir: rest.ends_with('/'), rel: Cow::Borrowed(rel) });
        }
        let mut rel = String::with_capacity(rest.len());
        for raw in rest.split('/').filter(|s| !s.is_empty()) {
            let seg = decode(raw).ok_or(Refusal::Forbidden)?;
            if seg == "." || seg == ".." {
                return Err(Refusal::Forbidden);
            }
            if seg.bytes().any(|b| matches!(b, b'\\' | b'/' | b'\0' | b':')) || has_escape(&seg) {
                return Err(Refusal::Forbidden);
            }
            if seg.starts_with('.') && self.flags & DOTFILES == 0 {
                return Err(Refusal::NotFound);
            }
            if !rel.is_empty() {
                rel.push('/');
            }
            rel.push_str(&seg);
        }
        Ok(Target { dir: rest.ends_with('/'), rel: Cow::Owned(rel) })
    }

    /// The kept copy of the small file `rel` (checked by `target`), if the file is still
    /// that version.
    pub(crate) fn kept(&self, rel: &str) -> Option<std::sync::Arc<Small>> {
        #[cfg(target_os = "linux")]
        {
            self.small.get(&self.root_dir, rel)
        }
        #[cfg(not(target_os = "linux"))]
        {
            let _ = rel;
            None
        }
    }

    /// Opens `rel` (checked by `target`) beneath the folder; a symlink may point
    /// anywhere inside it, never outside.
    pub(crate) fn open(&self, rel: &str) -> std::result::Result<File, Refusal> {
        #[cfg(target_os = "linux")]
        {
            match open_beneath(&self.root_dir, rel) {
                Ok(f) => return Ok(f),
                // No openat2 (old kernel, seccomp): check the resolved path instead. EXDEV:
                // RESOLVE_BENEATH refuses every absolute symlink, also one that points
                // inside the folder; the resolved path decides.
                Err(e) if matches!(e.raw_os_error(), Some(libc::ENOSYS | libc::EPERM | libc::EXDEV)) => {}
                Err(e) => return Err(refusal(&e)),
            }
        }
        self.open_checked(rel)
    }

    /// Without openat2: resolve every link, then insist the result is in the folder.
    fn open_checked(&self, rel: &str) -> std::result::Result<File, Refusal> {
        let path = if rel.is_empty() { self.root.clone() } else { self.root.join(Path::new(rel)) };
        let real = std::fs::canonicalize(&path).map_err(|e| refusal(&e))?;
        if !real.starts_with(&self.root) {
            return Err(Refusal::Forbidden);
        }
        let mut options = std::fs::OpenOptions::new();
        options.read(true);
        // A FIFO would block the open until a writer came; regular files ignore it.
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::custom_flags(&mut options, libc::O_NONBLOCK);
        // Windows opens a folder only with backup semantics; the caller asks it whether
        // it is one.
        #[cfg(windows)]
        std::os::windows::fs::OpenOptionsExt::custom_flags(&mut options, 0x0200_0000);
        options.open(&real).map_err(|e| refusal(&e))
    }
}

fn refusal(e: &std::io::Error) -> Refusal {
    #[cfg(unix)]
    if let Some(code) = e.raw_os_error() {
        // EXDEV: the path left the folder (RESOLVE_BENEATH); ELOOP: too many links.
        if code == libc::EXDEV || code == libc::ELOOP || code == libc::EACCES {
            return Refusal::Forbidden;
        }
    }
    match e.kind() {
        std::io::ErrorKind::PermissionDenied => Refusal::Forbidden,
        _ => Refusal::NotFound,
    }
}

#[cfg(target_os = "linux")]
fn open_beneath(dir: &File, rel: &str) -> std::io::Result<File> {
    use std::os::fd::{AsRawFd, FromRawFd};
    #[repr(C)]
    struct OpenHow {
        flags: u64,
        mode: u64,
        resolve: u64,
    }
    const RESOLVE_NO_MAGICLINKS: u64 = 0x02;
    const RESOLVE_BENEATH: u64 = 0x08;
    let path = std::ffi::CString::new(if rel.is_empty() { "." } else { rel }).map_err(|_| std::io::Error::from_raw_os_error(libc::EINVAL))?;
    let how = OpenHow { flags: (libc::O_RDONLY | libc::O_CLOEXEC | libc::O_NOCTTY | libc::O_NONBLOCK) as u64, mode: 0, resolve: RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS };
    // SAFETY: a valid directory descriptor, a NUL-terminated path and a properly sized
    // open_how; the returned descriptor is ours alone.
    let fd = unsafe {
        libc::syscall(libc::SYS_openat2, dir.as_raw_fd(), path.as_ptr(), &how as *const OpenHow, std::mem::size_of::<OpenHow>())
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a fresh descriptor returned by the kernel.
    Ok(unsafe { File::from_raw_fd(fd as i32) })
}

/// The name `rest` gives when it has nothing to decode or refuse, checked in one pass: no
/// escape, backslash, NUL or ':', no empty segment but at its ends, no segment starting
/// with '.' (dot segments, dotfiles). Then the name is `rest` without its end slashes, as
/// `target` would build it segment by segment. None: `target` looks closer.
fn plain(rest: &str) -> Option<&str> {
    let b = rest.as_bytes();
    if b.first() != Some(&b'/') {
        return None;
    }
    let mut prev = b'/';
    for &c in &b[1..] {
        match c {
            b'%' | b'\\' | b'\0' | b':' => return None,
            b'/' | b'.' if prev == b'/' => return None,
            _ => {}
        }
        prev = c;
    }
    let rel = &rest[1..];
    Some(rel.strip_suffix('/').unwrap_or(rel))
}

/// One percent-decoding to text; None when the bytes are not UTF-8.
fn decode(raw: &str) -> Option<String> {
    if !raw.contains('%') {
        return Some(raw.to_owned());
    }
    let b = raw.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        if b[i] == b'%' {
            if let (Some(h), Some(l)) = (b.get(i + 1).and_then(|c| hex(*c)), b.get(i + 2).and_then(|c| hex(*c))) {
                out.push((h * 16 + l) as u8);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8(out).ok()
}

/// Still percent-encoded after one decoding: a double-encoded path ("%252e%252e").
fn has_escape(s: &str) -> bool {
    s.as_bytes().windows(3).any(|w| w[0] == b'%' && w[1].is_ascii_hexdigit() && w[2].is_ascii_hexdigit())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mount(flags: u32) -> (tempdir::Dir, Mount) {
        let d = tempdir::Dir::new();
        let m = Mount::new("/static/", d.path.to_str().unwrap(), flags, Some("max-age=60")).unwrap();
        (d, m)
    }

    mod tempdir {
        pub struct Dir {
            pub path: std::path::PathBuf,
        }
        impl Dir {
            pub fn new() -> Dir {
                use std::sync::atomic::{AtomicU32, Ordering};
                static N: AtomicU32 = AtomicU32::new(0);
                let path = std::env::temp_dir().join(format!("ember-static-{}-{}", std::process::id(), N.fetch_add(1, Ordering::Relaxed)));
                std::fs::create_dir_all(&path).unwrap();
                Dir { path }
            }
        }
        impl Drop for Dir {
            fn drop(&mut self) {
                let _ = std::fs::remove_dir_all(&self.path);
            }
        }
    }

    #[test]
    fn traversal_in_every_spelling_is_refused() {
        let (_d, m) = mount(INDEX);
        for bad in ["/../x", "/a/%2e%2e/x", "/%2E%2E/x", "/a%2fb", "/a%5cb", "/a\\b", "/%252e%252e/x", "/a%00b", "/c:/x", "/./x"] {
            assert_eq!(m.target(bad).err(), Some(Refusal::Forbidden), "{bad}");
        }
        assert_eq!(m.target("/.env").err(), Some(Refusal::NotFound));
        assert_eq!(m.target("/a/.git/config").err(), Some(Refusal::NotFound));
        let t = m.target("/a//b%20c.txt").unwrap();
        assert_eq!((&*t.rel, t.dir), ("a/b c.txt", false));
        // The one-pass shortcut gives what the segment by segment walk gives.
        for (rest, rel, dir) in [("/a/b.txt", "a/b.txt", false), ("/docs/", "docs", true), ("/", "", true), ("/a-b_c~d", "a-b_c~d", false)] {
            let t = m.target(rest).unwrap();
            assert!(matches!(t.rel, Cow::Borrowed(_)), "{rest}");
            assert_eq!((&*t.rel, t.dir), (rel, dir), "{rest}");
        }
        for rest in ["", "/a//b", "/.x", "/a/.b", "/a/..", "/a%41", "/a\\b", "/c:", "/a\0"] {
            assert!(plain(rest).is_none(), "{rest}");
        }
        assert!(m.target("/docs/").unwrap().dir);
        assert!(!m.target("").unwrap().dir);
        let (_d2, dots) = mount(DOTFILES);
        assert_eq!(dots.target("/.well-known/x").unwrap().rel, ".well-known/x");
    }

    #[test]
    fn prefixes_claim_whole_segments() {
        let (_d, m) = mount(0);
        assert_eq!(m.prefix, "/static");
        assert_eq!(m.claims("/static/a"), Some("/a"));
        assert_eq!(m.claims("/static"), Some(""));
        assert_eq!(m.claims("/staticx"), None);
        assert!(Mount::new("static", "/tmp", 0, None).is_err());
        assert!(Mount::new("/s", "/no/such/folder", 0, None).is_err());
        assert!(Mount::new("/s", "/tmp", 64, None).is_err());
        assert!(Mount::new("/s", "/tmp", 0, Some("bad\nvalue")).is_err());
    }

    #[cfg(unix)]
    #[test]
    fn symlinks_may_not_lead_out_of_the_folder() {
        let (d, m) = mount(0);
        std::fs::write(d.path.join("in.txt"), b"inside").unwrap();
        let outside = tempdir::Dir::new();
        std::fs::write(outside.path.join("secret.txt"), b"secret").unwrap();
        std::os::unix::fs::symlink(outside.path.join("secret.txt"), d.path.join("out.txt")).unwrap();
        std::os::unix::fs::symlink("in.txt", d.path.join("alias.txt")).unwrap();
        std::os::unix::fs::symlink("/etc", d.path.join("etc")).unwrap();
        std::os::unix::fs::symlink(d.path.join("in.txt"), d.path.join("absolute.txt")).unwrap();
        assert!(m.open("in.txt").is_ok());
        assert!(m.open("alias.txt").is_ok());
        assert!(m.open("absolute.txt").is_ok());
        assert_eq!(m.open("out.txt").err(), Some(Refusal::Forbidden));
        assert_eq!(m.open("etc/passwd").err(), Some(Refusal::Forbidden));
        assert_eq!(m.open("missing.txt").err(), Some(Refusal::NotFound));
        assert_eq!(m.open_checked("out.txt").err(), Some(Refusal::Forbidden));
        assert!(m.open_checked("alias.txt").is_ok());
    }
}
