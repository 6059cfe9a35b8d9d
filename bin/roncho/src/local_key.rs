//! The local key: a loopback server that requires a key without an
//! operator managing secrets (`local_key`). At first start a secret is
//! generated into `<data_dir>/auth/secret`, and an admin key signed with
//! it into `<data_dir>/auth/admin.key`, both readable by their owner only
//! (the directory too); the CLI and `roncho mcp --addr` read the key from
//! there. Another user's process on the machine then reaches the port but
//! not the memory, nor the database files ([`make_private`]).

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Context;

/// The folder of the data directory that holds the local key.
const DIR: &str = "auth";
const SECRET_FILE: &str = "secret";
const ADMIN_KEY_FILE: &str = "admin.key";

/// Shortest secret accepted from the folder (what `random_secret` writes is 64).
const MIN_SECRET_CHARS: usize = 64;

/// Returns the local secret of `data_dir`, generating it (and its admin
/// key) at first use. The database files are made readable by their owner
/// only ([`make_private`]); the `auth` folder and its files too, and one
/// that is a link, or that someone else owns (planted before the first
/// start), is refused rather than trusted.
pub fn load_or_create(data_dir: &Path) -> anyhow::Result<String> {
    make_private(data_dir)?;
    let dir = data_dir.join(DIR);
    create_private_dir(&dir)?;
    let secret_path = dir.join(SECRET_FILE);
    let secret = match read_private(&secret_path, true)? {
        Some(secret) if secret.len() >= MIN_SECRET_CHARS => secret,
        Some(_) => anyhow::bail!(
            "{} holds a secret shorter than {MIN_SECRET_CHARS} characters: not one roncho wrote; remove the auth \
             folder to have a new one generated",
            secret_path.display()
        ),
        None => {
            let secret = roncho_gate::keys::random_secret()?;
            write_private(&secret_path, &secret)?;
            tracing::info!(path = %secret_path.display(), "generated the local key's secret");
            secret
        }
    };
    let admin_path = dir.join(ADMIN_KEY_FILE);
    let keys = roncho_gate::keys::KeySet::new(&[secret.as_str()])?;
    let valid = read_private(&admin_path, true)?.is_some_and(|key| {
        let now = roncho_core::model::now_micros().div_euclid(1_000_000);
        keys.verify(&key, now).is_ok()
    });
    if !valid {
        let key = keys.sign(&roncho_gate::keys::Claims {
            ad: Some(true),
            iat: Some(roncho_core::model::now_micros().div_euclid(1_000_000)),
            ..roncho_gate::keys::Claims::default()
        });
        write_private(&admin_path, &key)?;
    }
    Ok(secret)
}

/// Makes the embedded database files in `data_dir` readable by their
/// owner only (they may have been created readable by all before; SQLite
/// gives its WAL files the database's mode). A data directory roncho
/// creates is its owner's only; one that exists may be a link (to another
/// disk) and keep a mode others can read, but must be this user's and not
/// writable by all, or another user could plant or swap the files.
/// A database file that is a link or another user's is refused: whoever
/// owns it reads what is written into it.
pub fn make_private(data_dir: &Path) -> anyhow::Result<()> {
    create_dir_owner_only(data_dir)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        let metadata = std::fs::metadata(data_dir).with_context(|| format!("reading {}", data_dir.display()))?;
        let us = effective_uid();
        if metadata.uid() != us {
            anyhow::bail!(
                "refusing the data directory {}: it belongs to user {}, not to this process's user {us}, who could \
                 read or swap the memory's files; use a directory of your own",
                data_dir.display(),
                metadata.uid()
            );
        }
        // Group-writable is left alone: with a group of its own (umask 002) it is the user's.
        if metadata.permissions().mode() & 0o002 != 0 {
            anyhow::bail!(
                "refusing the data directory {}: others may write into it (mode {:o}) and plant or swap the \
                 memory's files; `chmod o-w` it or use another",
                data_dir.display(),
                metadata.permissions().mode() & 0o7777
            );
        }
    }
    for name in ["roncho.db", "roncho.db-wal", "roncho.db-shm"] {
        let path = data_dir.join(name);
        if std::fs::symlink_metadata(&path).is_ok() {
            owned_by_us(&path, false)?;
            restrict(&path, 0o600)?;
        }
    }
    Ok(())
}

/// Returns the admin key kept in `data_dir`, if a server with a local key
/// wrote one there. Whose it is matters to the server reading its secret,
/// not to a client: the superuser reads another user's (`sudo roncho ...`).
pub fn admin_key(data_dir: &Path) -> anyhow::Result<Option<String>> {
    read_private(&admin_key_path(data_dir), effective_uid() != 0)
}

/// Returns the admin key kept in `data_dir` for a call to the server at
/// `base` (a REST edge's URL), only where that server is this user's on
/// this machine: a loopback address whose port a socket of this user
/// listens on, and no other user's (Linux: `/proc/net/tcp`, `tcp6`). A key
/// read from disk is never sent to another host, nor to a port that
/// another local process holds while the server is down.
pub fn admin_key_for(data_dir: &Path, base: &str) -> anyhow::Result<Option<String>> {
    let Ok(url) = reqwest::Url::parse(base) else {
        return Ok(None);
    };
    let Some(port) = url.port_or_known_default() else {
        return Ok(None);
    };
    if !roncho_mcp::upstream::is_loopback(&url) || !listened_on_by_us(port) {
        return Ok(None);
    }
    admin_key(data_dir)
}

/// Whether sockets listening on TCP `port` exist and are all this user's.
#[cfg(target_os = "linux")]
fn listened_on_by_us(port: u16) -> bool {
    let mut owners = Vec::new();
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let Ok(text) = std::fs::read_to_string(table) else {
            continue;
        };
        owners.extend(listeners_of(&text, port));
    }
    !owners.is_empty() && owners.iter().all(|&uid| uid == effective_uid())
}

/// Elsewhere a loopback port is trusted as it is.
#[cfg(not(target_os = "linux"))]
fn listened_on_by_us(_port: u16) -> bool {
    true
}

/// The owners' uids of the sockets listening on `port` in a `/proc/net/tcp`
/// table (`sl local_address rem_address st … uid …`, hex address:port,
/// state `0A` for LISTEN).
fn listeners_of(table: &str, port: u16) -> Vec<u32> {
    table
        .lines()
        .skip(1)
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let local_port = u16::from_str_radix(fields.get(1)?.rsplit(':').next()?, 16).ok()?;
            (local_port == port && *fields.get(3)? == "0A").then(|| fields.get(7)?.parse().ok())?
        })
        .collect()
}

/// Returns where the admin key of `data_dir` is kept.
pub fn admin_key_path(data_dir: &Path) -> PathBuf {
    data_dir.join(DIR).join(ADMIN_KEY_FILE)
}

/// Creates `dir` (and its parents) readable by its owner only, unless it exists.
fn create_dir_owner_only(dir: &Path) -> anyhow::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder
        .create(dir)
        .with_context(|| format!("creating {}", dir.display()))
}

/// Creates `dir` readable by its owner only, and refuses one that is a
/// link or another user's; one that exists is made owner-only.
fn create_private_dir(dir: &Path) -> anyhow::Result<()> {
    create_dir_owner_only(dir)?;
    owned_by_us(dir, true)?;
    restrict(dir, 0o700)
}

/// Refuses `path` unless it is a real directory (`directory`) or regular
/// file, not a link, owned by the user this process runs as.
pub(crate) fn owned_by_us(path: &Path, directory: bool) -> anyhow::Result<()> {
    let metadata = std::fs::symlink_metadata(path).with_context(|| format!("reading {}", path.display()))?;
    let kind = metadata.file_type();
    let right_kind = if directory { kind.is_dir() } else { kind.is_file() };
    if !right_kind {
        anyhow::bail!(
            "refusing {}: it is not a plain {} (a link, or something else planted there)",
            path.display(),
            if directory { "directory" } else { "file" }
        );
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        let us = effective_uid();
        if metadata.uid() != us {
            anyhow::bail!(
                "refusing {}: it belongs to user {}, not to this process's user {us}; whoever owns it \
                 could have planted it, and reads what is written into it",
                path.display(),
                metadata.uid()
            );
        }
    }
    Ok(())
}

/// The user this process runs as (elsewhere: not the superuser).
#[cfg(not(unix))]
fn effective_uid() -> u32 {
    1
}

/// The user this process runs as.
#[cfg(unix)]
#[expect(unsafe_code, reason = "libc's geteuid has no safe binding")]
fn effective_uid() -> u32 {
    // SAFETY: geteuid takes nothing, cannot fail and has no side effects.
    unsafe { libc::geteuid() }
}

/// Reads a private file's text (trimmed); `None` when it does not exist.
/// One that others could read is made private first: its secret may have
/// leaked already, which the log says. With `ours`, a file of another user
/// is refused.
fn read_private(path: &Path, ours: bool) -> anyhow::Result<Option<String>> {
    if ours && std::fs::symlink_metadata(path).is_ok() {
        owned_by_us(path, false)?;
    }
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::custom_flags(&mut options, libc::O_NOFOLLOW);
    let read = options.open(path).and_then(|mut file| {
        let mut text = String::new();
        std::io::Read::read_to_string(&mut file, &mut text).map(|_| (file, text))
    });
    match read {
        Ok((file, text)) => {
            // Asked of the file opened, not of the path again (no link followed).
            #[cfg(unix)]
            {
                use std::os::unix::fs::PermissionsExt;
                let mode = file.metadata()?.permissions().mode();
                if mode & 0o077 != 0 && ours {
                    tracing::warn!(path = %path.display(), mode = format!("{mode:o}"), "the local key was readable by others: made private; rotate it by deleting the auth folder if others had access");
                    file.set_permissions(std::fs::Permissions::from_mode(0o600))
                        .with_context(|| format!("restricting {}", path.display()))?;
                }
            }
            #[cfg(not(unix))]
            drop(file);
            let text = text.trim().to_owned();
            Ok((!text.is_empty()).then_some(text))
        }
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(error) => Err(error).with_context(|| format!("reading {}", path.display())),
    }
}

/// Writes `text` to `path`, readable by its owner only from its first byte.
fn write_private(path: &Path, text: &str) -> anyhow::Result<()> {
    let temporary = path.with_extension("tmp");
    let _ = std::fs::remove_file(&temporary);
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options
        .open(&temporary)
        .with_context(|| format!("creating {}", temporary.display()))?;
    file.write_all(text.as_bytes())?;
    file.sync_all()?;
    std::fs::rename(&temporary, path).with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

pub(crate) fn restrict(path: &Path, mode: u32) -> anyhow::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
            .with_context(|| format!("restricting {}", path.display()))?;
    }
    #[cfg(not(unix))]
    let _ = (path, mode);
    Ok(())
}

#[cfg(test)]
mod listener_tests {
    use super::listeners_of;

    #[test]
    fn only_listening_sockets_on_the_port_count_with_their_owners() {
        let table = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1F40 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 1 1 0
   1: 00000000:1F40 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1001        0 2 1 0
   2: 0100007F:1F40 0100007F:9C40 01 00000000:00000000 00:00000000 00000000     0        0 3 1 0
   3: 0100007F:1F41 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 4 1 0";
        assert_eq!(
            listeners_of(table, 8000),
            [1000, 1001],
            "LISTEN on 8000 only, any address"
        );
        assert_eq!(listeners_of(table, 8001), [0]);
        assert!(listeners_of(table, 9).is_empty());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stored_admin_key_goes_only_to_a_loopback_port_this_user_listens_on() {
        let dir = tempfile::tempdir().unwrap();
        load_or_create(dir.path()).unwrap();
        let ours = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = ours.local_addr().unwrap().port();
        let free = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let key = |base: &str| admin_key_for(dir.path(), base).unwrap();
        assert!(key(&format!("http://127.0.0.1:{port}")).is_some());
        assert!(key(&format!("http://localhost:{port}/")).is_some());
        for elsewhere in [
            format!("http://127.0.0.1:{free}"),
            format!("http://192.0.2.2:{port}"),
            format!("https://roncho.example.com:{port}"),
            format!("http://127.0.0.1.example.com:{port}"),
            "not a url".to_owned(),
        ] {
            assert_eq!(key(&elsewhere), None, "{elsewhere}");
        }
    }

    #[test]
    fn the_secret_and_admin_key_are_made_once_and_private() {
        let dir = tempfile::tempdir().unwrap();
        let secret = load_or_create(dir.path()).unwrap();
        assert_eq!(secret.len(), 64);
        let key = admin_key(dir.path()).unwrap().unwrap();
        let keys = roncho_gate::keys::KeySet::new(&[secret.as_str()]).unwrap();
        assert_eq!(keys.verify(&key, 0).unwrap(), roncho_core::Caller::Admin);
        // A second start keeps both.
        assert_eq!(load_or_create(dir.path()).unwrap(), secret);
        assert_eq!(admin_key(dir.path()).unwrap().unwrap(), key);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = |path: &Path| std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode(&dir.path().join(DIR)), 0o700);
            assert_eq!(mode(&dir.path().join(DIR).join(SECRET_FILE)), 0o600);
            assert_eq!(mode(&admin_key_path(dir.path())), 0o600);
            // One that others could read is made private again.
            std::fs::set_permissions(admin_key_path(dir.path()), std::fs::Permissions::from_mode(0o644)).unwrap();
            load_or_create(dir.path()).unwrap();
            assert_eq!(mode(&admin_key_path(dir.path())), 0o600);
            // A data directory it creates is its owner's only ...
            let data = dir.path().join("new").join("data");
            load_or_create(&data).unwrap();
            assert_eq!(mode(&data), 0o700);
            // ... and one that is a link (to another disk) is used as it is.
            let linked = dir.path().join("linked");
            std::os::unix::fs::symlink(&data, &linked).unwrap();
            assert_eq!(load_or_create(&linked).unwrap(), load_or_create(&data).unwrap());
        }
    }

    #[cfg(unix)]
    #[test]
    fn a_planted_secret_a_link_or_a_short_secret_is_refused() {
        // A secret someone else wrote before the first start: too short to be ours.
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join(DIR)).unwrap();
        std::fs::write(dir.path().join(DIR).join(SECRET_FILE), "a".repeat(27)).unwrap();
        let error = load_or_create(dir.path()).unwrap_err().to_string();
        assert!(error.contains("shorter"), "{error}");
        // A link to another file, whatever it holds.
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join(DIR)).unwrap();
        let target = dir.path().join("victim.conf");
        std::fs::write(&target, "x".repeat(80)).unwrap();
        std::os::unix::fs::symlink(&target, dir.path().join(DIR).join(SECRET_FILE)).unwrap();
        let error = load_or_create(dir.path()).unwrap_err().to_string();
        assert!(error.contains("not a plain file"), "{error}");
        // A linked auth folder.
        let dir = tempfile::tempdir().unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(elsewhere.path(), dir.path().join(DIR)).unwrap();
        let error = load_or_create(dir.path()).unwrap_err().to_string();
        assert!(error.contains("not a plain directory"), "{error}");
        // An existing database readable by others is made private.
        let dir = tempfile::tempdir().unwrap();
        let database = dir.path().join("roncho.db");
        std::fs::write(&database, b"").unwrap();
        std::fs::set_permissions(&database, std::os::unix::fs::PermissionsExt::from_mode(0o644)).unwrap();
        load_or_create(dir.path()).unwrap();
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(&database).unwrap().permissions().mode() & 0o777,
            0o600
        );
        // A database file that is a link to another's file.
        let dir = tempfile::tempdir().unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        std::fs::write(elsewhere.path().join("theirs.db"), b"").unwrap();
        std::os::unix::fs::symlink(elsewhere.path().join("theirs.db"), dir.path().join("roncho.db")).unwrap();
        let error = load_or_create(dir.path()).unwrap_err().to_string();
        assert!(error.contains("not a plain file"), "{error}");
        // A data directory others may write into.
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
        let error = load_or_create(dir.path()).unwrap_err().to_string();
        assert!(error.contains("others may write"), "{error}");
        // Another user's database file or data directory (the superuser can plant them).
        if effective_uid() == 0 {
            let nobody = 65_534;
            let dir = tempfile::tempdir().unwrap();
            std::fs::write(dir.path().join("roncho.db"), b"").unwrap();
            std::os::unix::fs::chown(dir.path().join("roncho.db"), Some(nobody), Some(nobody)).unwrap();
            let error = load_or_create(dir.path()).unwrap_err().to_string();
            assert!(error.contains("belongs to user 65534"), "{error}");
            let dir = tempfile::tempdir().unwrap();
            std::os::unix::fs::chown(dir.path(), Some(nobody), Some(nobody)).unwrap();
            let error = load_or_create(dir.path()).unwrap_err().to_string();
            assert!(error.contains("belongs to user 65534"), "{error}");
        }
    }
}
