//! The local key: a loopback server that requires a key without an
//! operator managing secrets (`local_key`). At first start a secret is
//! generated into `<data_dir>/auth/secret`, and an admin key signed with
//! it into `<data_dir>/auth/admin.key`, both readable by their owner only
//! (the directory too); the CLI and `roncho mcp --addr` read the key from
//! there. Another user's process on the machine then reaches the port but
//! not the memory.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Context;

/// The folder of the data directory that holds the local key.
const DIR: &str = "auth";
const SECRET_FILE: &str = "secret";
const ADMIN_KEY_FILE: &str = "admin.key";

/// Returns the local secret of `data_dir`, generating it (and its admin
/// key) at first use.
pub fn load_or_create(data_dir: &Path) -> anyhow::Result<String> {
    let dir = data_dir.join(DIR);
    create_private_dir(&dir)?;
    let secret_path = dir.join(SECRET_FILE);
    let secret = match read_private(&secret_path)? {
        Some(secret) => secret,
        None => {
            let secret = roncho_gate::keys::random_secret()?;
            write_private(&secret_path, &secret)?;
            tracing::info!(path = %secret_path.display(), "generated the local key's secret");
            secret
        }
    };
    let admin_path = dir.join(ADMIN_KEY_FILE);
    let keys = roncho_gate::keys::KeySet::new(&[secret.as_str()])?;
    let valid = read_private(&admin_path)?.is_some_and(|key| {
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

/// Returns the admin key kept in `data_dir`, if a server with a local key
/// wrote one there.
pub fn admin_key(data_dir: &Path) -> anyhow::Result<Option<String>> {
    read_private(&admin_key_path(data_dir))
}

/// Returns where the admin key of `data_dir` is kept.
pub fn admin_key_path(data_dir: &Path) -> PathBuf {
    data_dir.join(DIR).join(ADMIN_KEY_FILE)
}

fn create_private_dir(dir: &Path) -> anyhow::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder
        .create(dir)
        .with_context(|| format!("creating {}", dir.display()))?;
    restrict(dir, 0o700)
}

/// Reads a private file's text (trimmed); `None` when it does not exist.
/// One that others could read is made private first: its secret may have
/// leaked already, which the log says.
fn read_private(path: &Path) -> anyhow::Result<Option<String>> {
    match std::fs::read_to_string(path) {
        Ok(text) => {
            #[cfg(unix)]
            {
                use std::os::unix::fs::PermissionsExt;
                let mode = std::fs::metadata(path)?.permissions().mode();
                if mode & 0o077 != 0 {
                    tracing::warn!(path = %path.display(), mode = format!("{mode:o}"), "the local key was readable by others: made private; rotate it by deleting the auth folder if others had access");
                    restrict(path, 0o600)?;
                }
            }
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

fn restrict(path: &Path, mode: u32) -> anyhow::Result<()> {
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
mod tests {
    use super::*;

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
        }
    }
}
