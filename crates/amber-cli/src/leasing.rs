//! The mount's read leases (design.md §17): the lease table the FUSE
//! adapter recalls through, and the socket preloaded processes ask on.
//! A mount whose socket cannot be made still serves, through the kernel
//! only, and its log says why.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use amber_lease::{LeaseServer, Leases, Welcome, RECALL_TIMEOUT, VERSION};

use amber_fuse::AmberFuse;

use crate::common::{MountConfig, PoolDevice, PoolFs, Shown};
use crate::daemon_log::line as log;

/// Where this daemon's lease socket may live, in the order tried: named
/// by the daemon's pid, short enough for any socket address.
fn socket_candidates() -> [PathBuf; 2] {
    let name = format!("{}.lease", std::process::id());
    [
        Path::new("/run/amberfs").join(&name),
        Path::new("/tmp/amberfs").join(&name),
    ]
}

/// The FUSE adapter over `fs` (pool `pool`), granting read leases from
/// the table and socket also returned (kept until the session ends), or
/// none where they could not be started.
pub fn adapter(
    fs: &PoolFs,
    pool: &Path,
    config: &MountConfig,
) -> (AmberFuse<PoolDevice>, Option<(Arc<Leases>, LeaseServer)>) {
    let leasing = start(fs, pool, config);
    let mut adapter = AmberFuse::new(fs.core().clone());
    if let Some((leases, server)) = &leasing {
        adapter = adapter.with_leases(
            Arc::clone(leases),
            server.path().to_path_buf(),
            server.closes(),
        );
    }
    (adapter, leasing)
}

/// Has a write grant first drop the kernel's pages and attributes of its
/// file (`Leases::on_write_grant`), through `session`'s notifier: offset
/// 0 and length 0 are the whole file. The kernel unmaps the pages from
/// every process and writes dirty ones back before the notification
/// returns.
pub fn drop_cached_on_write_grants<F: fuser::Filesystem>(
    leases: &Leases,
    session: &fuser::Session<F>,
) {
    let notifier = session.notifier();
    leases.on_write_grant(Box::new(move |ino| {
        // ENOENT: the kernel holds nothing of the file.
        let _ = notifier.inval_inode(fuser::INodeNo(ino), 0, 0);
    }));
}

/// Starts granting leases on `pool`, mounted as `fs`: the table, and the
/// server that welcomes clients with the pool's path and emulator.
fn start(fs: &PoolFs, pool: &Path, config: &MountConfig) -> Option<(Arc<Leases>, LeaseServer)> {
    let started = welcome(pool, config).and_then(|(welcome, owner)| {
        let core = Arc::clone(fs.core()) as Arc<dyn amber_lease::Owner>;
        let leases = Arc::new(Leases::new(RECALL_TIMEOUT, core));
        let mut last = None;
        for socket in socket_candidates() {
            let made = socket
                .parent()
                .map_or(Ok(()), std::fs::create_dir_all)
                .and_then(|()| {
                    LeaseServer::start(&socket, welcome.clone(), owner, Arc::clone(&leases))
                });
            match made {
                Ok(server) => return Ok((leases, server)),
                Err(e) => last = Some(format!("{}: {e}", socket.shown())),
            }
        }
        Err(last.unwrap_or_default())
    });
    match started {
        Ok((leases, server)) => {
            log(&format!("read leases granted on {}", server.path().shown()));
            Some((leases, server))
        }
        Err(e) => {
            log(&format!(
                "no read leases (preloaded processes read through the kernel): {e}"
            ));
            None
        }
    }
}

/// What a client is told, and the pool file's owner (who may be one).
fn welcome(pool: &Path, config: &MountConfig) -> Result<(Welcome, u32), String> {
    let path = std::fs::canonicalize(pool).map_err(|e| format!("{}: {e}", pool.shown()))?;
    let meta = std::fs::metadata(&path).map_err(|e| format!("{}: {e}", path.shown()))?;
    if !meta.is_file() {
        return Err(format!("{} is not a file a client can map", path.shown()));
    }
    let w = Welcome {
        version: VERSION,
        pool_dev: meta.dev(),
        pool_ino: meta.ino(),
        pool_size: meta.len(),
        emulate: config.emulate_spec(),
        pool: path,
    };
    Ok((w, meta.uid()))
}
