// Compiles the c10d shim against the libtorch headers that LIBTORCH points at (the Makefile sets
// it from scripts/setup-libtorch.sh). The wheel ships c10d's headers but not the gloo headers that
// ProcessGroupGloo.hpp includes; those are vendored under third_party/gloo (BSD licence).
//
// NCCL: with RUNFN_NCCL=1 and a CUDA libtorch (lib/libtorch_cuda.so), the shim also builds
// ProcessGroupNCCL. It needs the CUDA and NCCL headers: the include folders of the NVIDIA wheels
// installed beside torch are found automatically, and RUNFN_CUDA_INCLUDE (colon-separated) adds more.
use std::path::{Path, PathBuf};

fn main() {
    println!("cargo:rerun-if-env-changed=LIBTORCH");
    println!("cargo:rerun-if-env-changed=RUNFN_NCCL");
    println!("cargo:rerun-if-env-changed=RUNFN_CUDA_INCLUDE");
    println!("cargo:rerun-if-changed=csrc/c10d_shim.cpp");
    println!("cargo:rustc-check-cfg=cfg(runfn_nccl)");
    let Ok(libtorch) = std::env::var("LIBTORCH") else {
        panic!(
            "LIBTORCH is not set: build through `make` (it runs scripts/setup-libtorch.sh), or export \
             LIBTORCH=$(scripts/setup-libtorch.sh)"
        );
    };
    let libtorch = PathBuf::from(libtorch);
    let mut build = cc::Build::new();
    build
        .cpp(true)
        .std("c++17")
        .file("csrc/c10d_shim.cpp")
        .include(libtorch.join("include"))
        .include(libtorch.join("include/torch/csrc/api/include"))
        .include("third_party/gloo")
        .define("_GLIBCXX_USE_CXX11_ABI", "1")
        .define("USE_C10D_GLOO", None)
        .flag_if_supported("-Wno-unused-parameter")
        .flag_if_supported("-Wno-deprecated-declarations")
        .warnings(false);
    let nccl = std::env::var("RUNFN_NCCL").is_ok_and(|v| v == "1");
    if nccl {
        if !libtorch.join("lib/libtorch_cuda.so").exists() {
            panic!(
                "RUNFN_NCCL=1 needs a CUDA libtorch, but {} has no lib/libtorch_cuda.so \
                 (scripts/setup-libtorch.sh --cuda installs one)",
                libtorch.display()
            );
        }
        build
            .define("USE_C10D_NCCL", None)
            .define("USE_CUDA", None)
            .define("RUNFN_WITH_NCCL", None);
        for dir in cuda_includes(&libtorch) {
            build.include(dir);
        }
        println!("cargo:rustc-cfg=runfn_nccl");
    }
    build.compile("runfn_c10d");
    println!(
        "cargo:rustc-link-search=native={}",
        libtorch.join("lib").display()
    );
    println!("cargo:rustc-link-lib=dylib=torch_cpu");
    println!("cargo:rustc-link-lib=dylib=c10");
    // This crate's own test binaries find libtorch through an rpath, as every binary does.
    println!(
        "cargo:rustc-link-arg=-Wl,-rpath,{}",
        libtorch.join("lib").display()
    );
    if nccl {
        println!("cargo:rustc-link-lib=dylib=torch_cuda");
        println!("cargo:rustc-link-lib=dylib=c10_cuda");
    }
}

/// The `include` folders of the NVIDIA wheels pip put beside torch (nvidia/*/include and
/// nvidia/cu13/include), then RUNFN_CUDA_INCLUDE's.
fn cuda_includes(libtorch: &Path) -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    if let Some(site) = libtorch.parent()
        && let Ok(entries) = std::fs::read_dir(site.join("nvidia"))
    {
        for entry in entries.flatten() {
            let include = entry.path().join("include");
            if include.is_dir() {
                dirs.push(include);
            }
        }
    }
    dirs.sort();
    if let Ok(extra) = std::env::var("RUNFN_CUDA_INCLUDE") {
        dirs.extend(
            extra
                .split(':')
                .filter(|s| !s.is_empty())
                .map(PathBuf::from),
        );
    }
    dirs
}
