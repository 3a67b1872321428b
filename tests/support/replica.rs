//! A PostgreSQL primary and a streaming replica of its own, on loopback ports, for the
//! read replica's tests: `initdb`, `pg_basebackup -R`, both started with `pg_ctl`, from
//! the PostgreSQL binaries installed, as the `postgres` user when the tests run as root
//! (initdb refuses root). Stopped and removed on drop.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::free_port;

pub struct ReplicaPair {
    dir: PathBuf,
    bin: PathBuf,
    pub primary_port: u16,
    pub replica_port: u16,
}

/// The newest installed PostgreSQL's server binaries.
fn postgres_bin() -> PathBuf {
    let mut versions: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .expect("PostgreSQL's server binaries under /usr/lib/postgresql")
        .filter_map(|e| e.ok().map(|e| e.path().join("bin")))
        .filter(|bin| bin.join("initdb").exists())
        .collect();
    versions.sort_by_key(|p| {
        p.parent()
            .and_then(|v| v.file_name())
            .and_then(|v| v.to_str())
            .and_then(|v| v.parse::<u32>().ok())
            .unwrap_or(0)
    });
    versions.pop().expect("an initdb")
}

fn running_as_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false)
}

/// Runs a PostgreSQL binary as the user that owns the data directories.
fn as_postgres(bin: &Path, program: &str, args: &[&str]) {
    let path = bin.join(program);
    let output = if running_as_root() {
        Command::new("runuser")
            .args(["-u", "postgres", "--"])
            .arg(&path)
            .args(args)
            .output()
    } else {
        Command::new(&path).args(args).output()
    }
    .unwrap_or_else(|e| panic!("{program}: {e}"));
    assert!(
        output.status.success(),
        "{program} {args:?}: {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

impl ReplicaPair {
    /// A primary and its replica, both accepting connections, the replica streaming.
    pub fn start() -> Self {
        let bin = postgres_bin();
        let dir =
            std::env::temp_dir().join(format!("rsv-replica-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&dir).expect("scratch directory");
        if running_as_root() {
            let owned = Command::new("chown")
                .args(["postgres:postgres"])
                .arg(&dir)
                .status()
                .expect("chown");
            assert!(owned.success(), "chown the scratch directory");
        }
        let pair = Self {
            dir,
            bin,
            primary_port: free_port(),
            replica_port: free_port(),
        };
        let primary = pair.data("primary");
        as_postgres(
            &pair.bin,
            "initdb",
            &[
                "-D",
                &primary,
                "-U",
                "postgres",
                "--auth=trust",
                "--no-sync",
                "-E",
                "UTF8",
            ],
        );
        let socket = pair.dir.display().to_string();
        let settings = format!(
            "\nlisten_addresses = '127.0.0.1'\nunix_socket_directories = '{socket}'\n\
             wal_level = replica\nmax_wal_senders = 4\nhot_standby = on\nfsync = off\n\
             max_connections = 120\nshared_buffers = 64MB\n"
        );
        append(&format!("{primary}/postgresql.conf"), &settings);
        pair.start_server("primary", pair.primary_port);
        let replica = pair.data("replica");
        as_postgres(
            &pair.bin,
            "pg_basebackup",
            &[
                "-h",
                "127.0.0.1",
                "-p",
                &pair.primary_port.to_string(),
                "-U",
                "postgres",
                "-D",
                &replica,
                "-R",
                "-X",
                "stream",
                "--no-sync",
            ],
        );
        pair.start_replica();
        pair
    }

    fn data(&self, name: &str) -> String {
        self.dir.join(name).display().to_string()
    }

    fn start_server(&self, name: &str, port: u16) {
        let log = self.dir.join(format!("{name}.log")).display().to_string();
        as_postgres(
            &self.bin,
            "pg_ctl",
            &[
                "-D",
                &self.data(name),
                "-l",
                &log,
                "-o",
                &format!("-p {port}"),
                "-w",
                "start",
            ],
        );
    }

    /// Starts the replica (again).
    pub fn start_replica(&self) {
        self.start_server("replica", self.replica_port);
    }

    /// Stops the replica at once, as a crash would.
    pub fn kill_replica(&self) {
        as_postgres(
            &self.bin,
            "pg_ctl",
            &["-D", &self.data("replica"), "-m", "immediate", "-w", "stop"],
        );
    }

    /// Stops the primary at once, as a crash would.
    pub fn kill_primary(&self) {
        as_postgres(
            &self.bin,
            "pg_ctl",
            &["-D", &self.data("primary"), "-m", "immediate", "-w", "stop"],
        );
    }

    /// Promotes the (running) replica to a primary of its own, on a new timeline.
    pub fn promote_replica(&self) {
        as_postgres(
            &self.bin,
            "pg_ctl",
            &["-D", &self.data("replica"), "-w", "promote"],
        );
    }

    pub fn primary_url(&self) -> String {
        format!(
            "postgres://postgres@127.0.0.1:{}/postgres",
            self.primary_port
        )
    }

    /// The URL of `database` on the replica.
    pub fn replica_url(&self, database: &str) -> String {
        format!(
            "postgres://postgres@127.0.0.1:{}/{database}",
            self.replica_port
        )
    }
}

fn append(path: &str, text: &str) {
    use std::io::Write;
    // The file belongs to postgres; root may append to it, and as postgres so may we.
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(path)
        .unwrap_or_else(|e| panic!("{path}: {e}"));
    file.write_all(text.as_bytes()).expect("append");
}

impl Drop for ReplicaPair {
    fn drop(&mut self) {
        for name in ["replica", "primary"] {
            let _ = Command::new(if running_as_root() { "runuser" } else { "env" })
                .args(if running_as_root() {
                    vec!["-u", "postgres", "--"]
                } else {
                    vec![]
                })
                .arg(self.bin.join("pg_ctl"))
                .args(["-D", &self.data(name), "-m", "immediate", "-w", "stop"])
                .output();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
