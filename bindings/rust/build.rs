//! Finds libregionalloc: REGIONALLOC_LIB_DIR (a directory holding
//! libregionalloc.so, such as a build tree's .libs), else pkg-config's
//! flags, else the linker's default paths. Runs the pkg-config program,
//! not a crate: the binding has no dependencies.

use std::env;
use std::path::Path;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    for var in [
        "REGIONALLOC_LIB_DIR",
        "PKG_CONFIG",
        "PKG_CONFIG_PATH",
        "PKG_CONFIG_LIBDIR",
    ] {
        println!("cargo:rerun-if-env-changed={}", var);
    }
    record_rustc_version();

    if let Some(dir) = env::var_os("REGIONALLOC_LIB_DIR") {
        let dir = Path::new(&dir);
        if !dir.join("libregionalloc.so").exists() {
            panic!(
                "REGIONALLOC_LIB_DIR={}: no libregionalloc.so there",
                dir.display()
            );
        }
        println!("cargo:rustc-link-search=native={}", dir.display());
        println!("cargo:rustc-link-lib=dylib=regionalloc");
        // A build tree is not on the loader's path: the crate's own tests,
        // examples and benches find the library through an rpath. Cargo
        // passes link-arg to this package's targets only, not to crates
        // that depend on it: those need LD_LIBRARY_PATH or an installed
        // library.
        println!("cargo:rustc-link-arg=-Wl,-rpath,{}", dir.display());
        return;
    }
    if link_with_pkg_config() {
        return;
    }
    println!("cargo:warning=regionalloc: neither REGIONALLOC_LIB_DIR nor pkg-config found libregionalloc; linking -lregionalloc from the default paths");
    println!("cargo:rustc-link-lib=dylib=regionalloc");
}

/// Emits the search paths and libraries of `pkg-config --libs --cflags
/// regionalloc`; false when pkg-config is missing or does not know it.
fn link_with_pkg_config() -> bool {
    let program = env::var("PKG_CONFIG").unwrap_or_else(|_| "pkg-config".to_string());
    let out = match Command::new(&program)
        .args(["--libs", "--cflags", "regionalloc"])
        .output()
    {
        Ok(out) if out.status.success() => out,
        _ => return false,
    };
    let flags = String::from_utf8_lossy(&out.stdout);
    for flag in flags.split_whitespace() {
        if let Some(dir) = flag.strip_prefix("-L") {
            println!("cargo:rustc-link-search=native={}", dir);
        } else if let Some(lib) = flag.strip_prefix("-l") {
            println!("cargo:rustc-link-lib=dylib={}", lib);
        }
    }
    true
}

/// The compiler's version, for the churn bench's machine line.
fn record_rustc_version() {
    let rustc = env::var("RUSTC").unwrap_or_else(|_| "rustc".to_string());
    let version = Command::new(rustc)
        .arg("--version")
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    println!("cargo:rustc-env=REGIONALLOC_RUSTC_VERSION={}", version);
}
