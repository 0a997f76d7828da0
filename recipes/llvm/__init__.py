"""The LLVM wing: the tools that read and write profiles and binaries. llvm-profdata (:mod:`.profdata`),
llvm-bolt, its instrumentation and merge-fdata (:mod:`.boltlib`), ELF reading (:mod:`.elf`) and the pure
checks of an optimised build (:mod:`.checks`). Nothing is re-exported."""
