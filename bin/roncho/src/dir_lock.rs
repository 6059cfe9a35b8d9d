//! One roncho at a time on an embedded data directory.
//!
//! A server on SQLite keeps state beside the files (the in-process vector
//! index, its queue's leases, caches): a second server, or an embedded
//! `roncho mcp`, on the same directory would serve a stale index and race
//! the first's workers. So whatever serves a data directory holds an
//! exclusive lock on `<data_dir>/serve.lock` for as long as it runs (the
//! kernel drops it when the process ends, however it ends), and writes
//! into it who it is and the REST address it serves, by which the
//! one-shot commands find it ([`holder`]). The file is this user's own, a
//! plain file readable by its owner only: never a link followed, nor a
//! file another user could lock.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use serde::{Deserialize, Serialize};

/// The lock's file in the data directory.
pub const LOCK_FILE: &str = "serve.lock";

/// How long anything waits for a one-shot command holding the directory.
const ONESHOT_WAIT: Duration = Duration::from_secs(10);

/// How often a one-shot command waiting for the directory looks again.
const POLL: Duration = Duration::from_millis(10);

/// Who serves a data directory, as its lock file says.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Holder {
    pub pid: u32,
    /// The REST edge's base URL, once it serves; `None` for a server with
    /// no REST port (`in_process`) or one still starting.
    #[serde(default)]
    pub rest: Option<String>,
    /// A one-shot command, done in a moment: worth waiting for.
    #[serde(default)]
    pub oneshot: bool,
    /// Serves only its own process (an embedded `roncho mcp`, a one-shot
    /// command): it will never have a REST address.
    #[serde(default)]
    pub in_process: bool,
}

impl Holder {
    /// The REST address, when it is one a one-shot command may call: a
    /// loopback http(s) origin, nothing else (no path, no credentials).
    pub fn rest_origin(&self) -> Option<String> {
        let url = reqwest::Url::parse(self.rest.as_deref()?).ok()?;
        let origin_only = matches!(url.scheme(), "http" | "https")
            && url.username().is_empty()
            && url.password().is_none()
            && matches!(url.path(), "" | "/")
            && url.query().is_none()
            && url.fragment().is_none();
        (origin_only && roncho_mcp::upstream::is_loopback(&url)).then(|| url.origin().ascii_serialization())
    }
}

/// The held lock of a data directory: released when dropped (or when the
/// process ends).
#[derive(Debug)]
pub struct DirLock {
    file: File,
    path: PathBuf,
    holder: Holder,
}

/// Opens the lock file: made new (owner only), or this user's plain file
/// as it is; a link, another user's file or anything else is refused.
fn open(data_dir: &Path, write: bool) -> anyhow::Result<(File, PathBuf)> {
    let path = data_dir.join(LOCK_FILE);
    if let Ok(metadata) = std::fs::symlink_metadata(&path) {
        crate::local_key::owned_by_us(&path, false)?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::MetadataExt;
            if metadata.nlink() > 1 {
                anyhow::bail!(
                    "refusing {}: it has other names (a hard link planted there); remove it",
                    path.display()
                );
            }
            // One others could open (an older roncho's) may be open in
            // another user's process, which could lock it: a new one
            // replaces it, unless a roncho holds it now.
            if write && metadata.mode() & 0o077 != 0 {
                let old = File::open(&path).with_context(|| format!("opening {}", path.display()))?;
                if old.try_lock().is_ok() {
                    std::fs::remove_file(&path).with_context(|| format!("replacing {}", path.display()))?;
                }
            }
        }
        #[cfg(not(unix))]
        let _ = metadata;
        if write && std::fs::symlink_metadata(&path).is_ok() {
            crate::local_key::restrict(&path, 0o600)?;
        }
    }
    let mut options = OpenOptions::new();
    options.read(true);
    if write {
        options.write(true).create(true).truncate(false);
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600).custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK);
    }
    let file = options
        .open(&path)
        .with_context(|| format!("opening {}", path.display()))?;
    Ok((file, path))
}

fn read_holder(file: &mut File) -> Option<Holder> {
    let mut text = String::new();
    file.rewind().ok()?;
    file.take(4096).read_to_string(&mut text).ok()?;
    serde_json::from_str(&text).ok()
}

/// Takes `data_dir`'s lock for a server (`oneshot`: for a one-shot
/// command; `in_process`: a server with no REST port). A one-shot command
/// waits while another one-shot command holds it, and gives up at once,
/// saying who holds it, when a server does (it is to be reached there); a
/// server waits only for a one-shot command.
pub fn acquire(data_dir: &Path, oneshot: bool, in_process: bool) -> anyhow::Result<DirLock> {
    std::fs::create_dir_all(data_dir).with_context(|| format!("creating the data directory {}", data_dir.display()))?;
    let (mut file, path) = open(data_dir, true)?;
    // Whoever looks who holds the lock holds it shared for an instant:
    // a few tries tell that from a holder.
    let mut tried = 0;
    let started = std::time::Instant::now();
    let mut said = false;
    loop {
        match file.try_lock() {
            Ok(()) => break,
            Err(TryLockError::Error(error)) => {
                return Err(error).with_context(|| format!("locking {}", path.display()));
            }
            Err(TryLockError::WouldBlock) => {}
        }
        let holder = read_holder(&mut file);
        // A holder whose word is not written yet (or not one roncho wrote)
        // is given a moment, a one-shot command's more.
        let patience = if oneshot { 100 } else { 5 };
        // A one-shot command holds it for a moment; one that holds it
        // longer (stopped, or writing to a pipe no one reads) is named.
        let wait =
            holder.as_ref().map_or(tried < patience, |holder| holder.oneshot) && started.elapsed() < ONESHOT_WAIT;
        if wait && !said && started.elapsed() > Duration::from_secs(1) {
            tracing::warn!(
                pid = holder.as_ref().map_or(0, |holder| holder.pid),
                "waiting for a one-shot command that holds the data directory"
            );
            said = true;
        }
        if !wait {
            let holder = holder.unwrap_or_default();
            let serving = match &holder.rest {
                Some(rest) => format!(", serving {rest}"),
                None => String::new(),
            };
            anyhow::bail!(
                "the data directory {} is in use by another roncho (process {}{serving}): stop it, or give this one \
                 another --data-dir; the one-shot commands (roncho search, …) reach a running server by themselves",
                data_dir.display(),
                holder.pid
            );
        }
        tried += 1;
        std::thread::sleep(POLL);
    }
    let holder = Holder {
        pid: std::process::id(),
        rest: None,
        oneshot,
        in_process,
    };
    let mut lock = DirLock { file, path, holder };
    lock.write()?;
    Ok(lock)
}

impl DirLock {
    /// Writes the REST address this process serves into the lock file.
    pub fn announce(&mut self, rest: Option<String>) -> anyhow::Result<()> {
        self.holder.rest = rest;
        self.write()
    }

    fn write(&mut self) -> anyhow::Result<()> {
        let text = serde_json::to_string(&self.holder)?;
        self.file.set_len(0)?;
        self.file.rewind()?;
        self.file
            .write_all(text.as_bytes())
            .and_then(|()| self.file.flush())
            .with_context(|| format!("writing {}", self.path.display()))
    }
}

/// Who holds `data_dir`'s lock now, `None` when nothing does (or there
/// is no such directory, or no lock file this user could have written).
pub fn holder(data_dir: &Path) -> Option<Holder> {
    let (mut file, _) = open(data_dir, false).ok()?;
    match file.try_lock_shared() {
        Ok(()) => None,
        Err(TryLockError::WouldBlock) => {
            // A holder writes its word just after it takes the lock.
            for _ in 0..25 {
                if let Some(holder) = read_holder(&mut file) {
                    return Some(holder);
                }
                std::thread::sleep(POLL);
            }
            Some(Holder::default())
        }
        Err(TryLockError::Error(_)) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_holder_at_a_time_and_it_says_where_it_serves() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(holder(dir.path()), None);
        let mut lock = acquire(dir.path(), false, false).unwrap();
        lock.announce(Some("http://127.0.0.1:8000".into())).unwrap();
        let held = holder(dir.path()).unwrap();
        assert_eq!(held.pid, std::process::id());
        assert_eq!(held.rest_origin().as_deref(), Some("http://127.0.0.1:8000"));
        assert!(!held.oneshot && !held.in_process);
        let refused = acquire(dir.path(), false, false).unwrap_err().to_string();
        assert!(
            refused.contains("in use by another roncho") && refused.contains("8000"),
            "{refused}"
        );
        let oneshot = acquire(dir.path(), true, true).unwrap_err().to_string();
        assert!(
            oneshot.contains("in use"),
            "a one-shot gives way to a server: {oneshot}"
        );
        drop(lock);
        assert_eq!(holder(dir.path()), None, "released when dropped");
        let again = acquire(dir.path(), true, true).unwrap();
        let held = holder(dir.path()).unwrap();
        assert!(held.rest.is_none() && held.oneshot && held.in_process, "{held:?}");
        drop(again);
    }

    #[test]
    fn only_a_loopback_origin_is_an_address() {
        let origin = |rest: &str| {
            Holder {
                rest: Some(rest.to_owned()),
                ..Holder::default()
            }
            .rest_origin()
        };
        assert_eq!(
            origin("http://127.0.0.1:8000").as_deref(),
            Some("http://127.0.0.1:8000")
        );
        assert_eq!(origin("https://[::1]:9/").as_deref(), Some("https://[::1]:9"));
        for planted in [
            "http://10.0.0.1:8000",
            "http://example.com",
            "http://user:pw@127.0.0.1:8000",
            "http://127.0.0.1:8000/x",
            "http://127.0.0.1:8000/#f",
            "http://127.0.0.1:8000/?q",
            "file:///etc/passwd",
            "nonsense",
        ] {
            assert_eq!(origin(planted), None, "{planted}");
        }
    }

    #[test]
    fn a_one_shot_that_holds_on_is_waited_for_a_while_then_named() {
        let dir = tempfile::tempdir().unwrap();
        let _held = acquire(dir.path(), true, true).unwrap();
        let started = std::time::Instant::now();
        let refused = acquire(dir.path(), false, false).unwrap_err().to_string();
        assert!(refused.contains(&std::process::id().to_string()), "{refused}");
        let waited = started.elapsed();
        assert!(waited >= ONESHOT_WAIT && waited < ONESHOT_WAIT * 2, "{waited:?}");
    }

    #[cfg(unix)]
    #[test]
    fn a_planted_hard_link_is_refused_and_its_file_untouched() {
        let dir = tempfile::tempdir().unwrap();
        let precious = dir.path().join("precious.txt");
        std::fs::write(&precious, "keep me").unwrap();
        std::fs::hard_link(&precious, dir.path().join(LOCK_FILE)).unwrap();
        assert!(acquire(dir.path(), false, false).is_err());
        assert_eq!(std::fs::read_to_string(&precious).unwrap(), "keep me");
    }

    #[cfg(unix)]
    #[test]
    fn a_planted_link_or_pipe_is_refused_and_its_target_untouched() {
        let dir = tempfile::tempdir().unwrap();
        let precious = dir.path().join("precious.txt");
        std::fs::write(&precious, "keep me").unwrap();
        std::os::unix::fs::symlink(&precious, dir.path().join(LOCK_FILE)).unwrap();
        assert!(acquire(dir.path(), false, false).is_err());
        assert_eq!(holder(dir.path()), None);
        assert_eq!(std::fs::read_to_string(&precious).unwrap(), "keep me");
        std::fs::remove_file(dir.path().join(LOCK_FILE)).unwrap();
        let made = std::process::Command::new("mkfifo")
            .arg(dir.path().join(LOCK_FILE))
            .status()
            .unwrap();
        assert!(made.success());
        assert!(acquire(dir.path(), true, true).is_err(), "a pipe is not waited on");
        assert_eq!(holder(dir.path()), None);
    }
}
