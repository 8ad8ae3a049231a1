// Binaries and tests linking libtorch find it through an rpath: tch's own rpath flags do not
// reach downstream crates. The same file is the build script of every crate that links tch.
fn main() {
    println!("cargo:rerun-if-env-changed=LIBTORCH");
    if let Ok(dir) = std::env::var("LIBTORCH") {
        println!("cargo:rustc-link-arg=-Wl,-rpath,{dir}/lib");
    }
}
