//! A scratch directory for one test, shared by the test crates (`#[path]`-included).

use std::path::{Path, PathBuf};

/// A fresh directory under the system's temporary one, named for the test and the process.
/// Removed when dropped if the test passed; kept (and its path printed) if it failed, so
/// the logs in it can be read.
pub struct Scratch(PathBuf);

impl Scratch {
    /// Empty, whatever an earlier run with the same process id left there.
    pub fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("neardup-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir)
            .unwrap_or_else(|e| panic!("cannot create {}: {e}", dir.display()));
        Self(dir)
    }
}

impl std::ops::Deref for Scratch {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("kept for reading: {}", self.0.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}
