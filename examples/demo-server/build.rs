//! Stamps the target triple and the enabled target features into the binary,
//! so `demo-server --build-info` can report what it was really compiled for.

fn main() {
    let target = std::env::var("TARGET").unwrap_or_default();
    let mut features: Vec<String> = std::env::var("CARGO_CFG_TARGET_FEATURE")
        .unwrap_or_default()
        .split(',')
        .filter(|f| !f.is_empty())
        .map(str::to_owned)
        .collect();
    features.sort();
    features.dedup();
    println!("cargo:rustc-env=DEMO_BUILD_TARGET={target}");
    println!("cargo:rustc-env=DEMO_BUILD_TARGET_FEATURES={}", features.join(","));
    println!("cargo:rerun-if-changed=build.rs");
}
