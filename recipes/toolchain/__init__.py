"""The toolchain wing: what compiles the crate and how. rustc and its llvm-profdata (:mod:`.rustc`), cargo's
command, logs and what they show was built (:mod:`.cargo`), the flags of the Rust and the C and C++ builds
(:mod:`.rustflags`, :mod:`.cflags`), cargo zigbuild (:mod:`.zig`), another architecture's linker and qemu
(:mod:`.emulation`) and the checks made before anything is built (:mod:`.preflight`). Nothing is re-exported."""
