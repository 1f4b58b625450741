//! Build script: tells the bindings which CPython they are built for.
//! `Py_GIL_DISABLED` is set for a free-threaded CPython (3.13t and later),
//! whose lists and reference counts `rust/py/lists.rs` must not touch
//! directly.

fn main() {
    println!("cargo:rustc-check-cfg=cfg(Py_GIL_DISABLED)");
    #[cfg(feature = "python")]
    pyo3_build_config::use_pyo3_cfgs();
}
