//! One roncho at a time on an embedded data directory.
//!
//! A server on SQLite keeps state beside the files (the in-process vector
//! index, its queue's leases, caches): a second server, or an embedded
//! `roncho mcp`, on the same directory would serve a stale index and race
//! the first's workers. So whatever serves a data directory holds an
//! exclusive lock on `<data_dir>/serve.lock` for as long as it runs (the
//! kernel drops it when the process ends, however it ends), and writes
//! into it its process id and the REST address it serves, by which the
//! one-shot commands find it ([`holder`]).

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};

use anyhow::Context;
use serde::{Deserialize, Serialize};

/// The lock's file in the data directory.
pub const LOCK_FILE: &str = "serve.lock";

/// Who serves a data directory, as its lock file says.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Holder {
    pub pid: u32,
    /// The REST edge's base URL; `None` for a server with no REST port
    /// (an embedded `roncho mcp`, a one-shot command).
    #[serde(default)]
    pub rest: Option<String>,
    /// A one-shot command, done in a moment: worth waiting for.
    #[serde(default)]
    pub oneshot: bool,
}

/// The held lock of a data directory: released when dropped (or when the
/// process ends).
#[derive(Debug)]
pub struct DirLock {
    file: File,
    path: PathBuf,
    oneshot: bool,
}

fn open(data_dir: &Path) -> anyhow::Result<(File, PathBuf)> {
    std::fs::create_dir_all(data_dir).with_context(|| format!("creating the data directory {}", data_dir.display()))?;
    let path = data_dir.join(LOCK_FILE);
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
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

/// Takes `data_dir`'s lock for a server (or, `oneshot`, for a one-shot
/// command). A one-shot command waits for whoever holds it; a server waits
/// only for a one-shot command, and otherwise fails at once saying who
/// holds it.
pub fn acquire(data_dir: &Path, oneshot: bool) -> anyhow::Result<DirLock> {
    let (mut file, path) = open(data_dir)?;
    // A one-shot command looking who holds the lock holds it shared for
    // an instant: a few tries tell that from a holder.
    let mut tried = 0;
    let mut attempt = file.try_lock();
    while matches!(attempt, Err(TryLockError::WouldBlock)) && !oneshot && tried < 5 {
        std::thread::sleep(std::time::Duration::from_millis(20));
        tried += 1;
        attempt = file.try_lock();
    }
    let holder = match attempt {
        Err(TryLockError::WouldBlock) => read_holder(&mut file),
        _ => None,
    };
    match attempt {
        Ok(()) => {}
        Err(TryLockError::WouldBlock) if oneshot || holder.as_ref().is_some_and(|holder| holder.oneshot) => {
            file.lock().with_context(|| format!("locking {}", path.display()))?;
        }
        Err(TryLockError::WouldBlock) => {
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
        Err(TryLockError::Error(error)) => {
            return Err(error).with_context(|| format!("locking {}", path.display()));
        }
    }
    let mut lock = DirLock { file, path, oneshot };
    lock.announce(None)?;
    Ok(lock)
}

impl DirLock {
    /// Writes this process and the REST address it serves into the lock file.
    pub fn announce(&mut self, rest: Option<String>) -> anyhow::Result<()> {
        let holder = Holder {
            pid: std::process::id(),
            rest,
            oneshot: self.oneshot,
        };
        let text = serde_json::to_string(&holder)?;
        self.file.set_len(0)?;
        self.file.rewind()?;
        self.file
            .write_all(text.as_bytes())
            .and_then(|()| self.file.flush())
            .with_context(|| format!("writing {}", self.path.display()))
    }
}

/// Who holds `data_dir`'s lock now, `None` when nothing does (or there
/// is no such directory).
pub fn holder(data_dir: &Path) -> Option<Holder> {
    let path = data_dir.join(LOCK_FILE);
    let mut file = OpenOptions::new().read(true).open(path).ok()?;
    match file.try_lock_shared() {
        Ok(()) => None,
        Err(TryLockError::WouldBlock) => {
            // A holder writes its word just after it takes the lock.
            for _ in 0..25 {
                if let Some(holder) = read_holder(&mut file) {
                    return Some(holder);
                }
                std::thread::sleep(std::time::Duration::from_millis(10));
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
        let mut lock = acquire(dir.path(), false).unwrap();
        lock.announce(Some("http://127.0.0.1:8000".into())).unwrap();
        let held = holder(dir.path()).unwrap();
        assert_eq!(held.pid, std::process::id());
        assert!(!held.oneshot);
        assert_eq!(held.rest.as_deref(), Some("http://127.0.0.1:8000"));
        let refused = acquire(dir.path(), false).unwrap_err().to_string();
        assert!(
            refused.contains("in use by another roncho") && refused.contains("8000"),
            "{refused}"
        );
        drop(lock);
        assert_eq!(holder(dir.path()), None, "released when dropped");
        let again = acquire(dir.path(), false).unwrap();
        assert_eq!(holder(dir.path()).unwrap().rest, None, "a new holder's own word");
        drop(again);
    }
}
