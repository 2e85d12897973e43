//! Link options for the `eddy` executable.
//!
//! On Linux with glibc the executable's relative relocations are packed
//! (`-z pack-relative-relocs`, DT_RELR: binutils 2.38+, glibc 2.36+, as in
//! Debian 12, eddy's build and runtime images). The usual table of them is
//! 5.7 MB that the loader reads in full at every start, and its pages stay
//! resident: packed, it is 67 KB, which takes about 5.5 MiB off every eddy
//! process's memory, while the executable stays position-independent (its
//! address still randomized). `EDDY_PLAIN_RELOCATIONS=1` at build time
//! links without it, for older toolchains.

fn main() {
    println!("cargo:rerun-if-env-changed=EDDY_PLAIN_RELOCATIONS");
    let target = |key: &str| std::env::var(key).unwrap_or_default();
    let plain = std::env::var_os("EDDY_PLAIN_RELOCATIONS").is_some_and(|v| v != "0");
    if target("CARGO_CFG_TARGET_OS") == "linux" && target("CARGO_CFG_TARGET_ENV") == "gnu" && !plain
    {
        println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
}
