"""The coverage check's pure parts, on a real ``llvm-profdata show --all-functions --counts`` capture of hello's
bench profile (tests/data/profdata-show-counts.txt, LLVM 22: block counts only, no function count line)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from recipes.bench import coverage
from recipes.toolchain.rustc import ProfdataTool
from tests.conftest import DATA


def test_counts_of_each_function_added_up() -> None:
    counts = coverage.parse_counts((DATA / "profdata-show-counts.txt").read_text())
    assert len(counts) == 8
    # a local function's record is named cgu;symbol: the symbol is kept
    assert counts["_ZN3std3sys9backtrace28__rust_begin_short_backtrace17h35817479f1376c01E"] == 40
    assert counts["_ZN5alloc5boxed16Box$LT$T$C$A$GT$13new_uninit_in17h6de384a55917245fE"] == 0
    fold = "_ZN102_$LT$core..iter..adapters..map..Map$LT$I$C$F$GT$$u20$as$u20$core..iter..traits..iterator..Iterator"
    assert counts[fold + "$GT$4fold17h40e5d8070878a74fE"] == 59960 + 4 * 20


def test_an_older_llvms_function_count_line_is_counted_too() -> None:
    text = "Counters:\n  f:\n    Hash: 0x1\n    Counters: 2\n    Function count: 7\n    Block counts: [3]\n  g:\n"
    assert coverage.parse_counts(text) == {"f": 10, "g": 0}


def test_the_hottest_functions_the_training_never_ran() -> None:
    bench = {"a": 5, "b": 50, "c": 500, "d": 0, "e": 7}
    training = {"a": 1, "b": 0, "d": 0}
    assert coverage.untrained_hot(bench, training) == [("c", 500), ("b", 50), ("e", 7)]
    assert coverage.untrained_hot(bench, training, top=1) == [("c", 500)]


@pytest.mark.skipif(shutil.which("llvm-cxxfilt-22") is None, reason="llvm-22 is not installed")
def test_rust_symbols_demangled_without_their_hash() -> None:
    tool = ProfdataTool(Path(shutil.which("llvm-profdata-22") or "/usr/bin/llvm-profdata-22"), "22.1.0")
    program = coverage.demangler(tool, {"PATH": "/usr/bin:/bin"})
    assert program is not None and "cxxfilt" in program.name
    names = ["_ZN9hello_pgo12primes_below17h0123456789abcdefE", "not_mangled"]
    assert coverage.demangle(names, program, {"PATH": "/usr/bin:/bin"}) == ["hello_pgo::primes_below", "not_mangled"]
    vec = "_ZN70_$LT$alloc..vec..Vec$LT$T$C$A$GT$$u20$as$u20$core..ops..drop..Drop$GT$4drop17h0db4e5ae779a726cE"
    assert coverage.demangle([vec], program, {"PATH": "/usr/bin:/bin"}) == [
        "<alloc::vec::Vec<T,A> as core::ops::drop::Drop>::drop"
    ]
    assert coverage.demangle(names, None, {}) == names


@pytest.mark.parametrize(
    ("cxxfilt", "rust"),
    [
        (  # as llvm-cxxfilt 22 printed them for ripgrep 15.2.0's bench profile
            "_$LT$grep_printer..standard..StandardSink$LT$M$C$W$GT$$u20$as$u20$grep_searcher..sink..Sink$GT$::context",
            "<grep_printer::standard::StandardSink<M,W> as grep_searcher::sink::Sink>::context",
        ),
        (
            "grep_printer::standard::StandardImpl$LT$M$C$W$GT$::write_path",
            "grep_printer::standard::StandardImpl<M,W>::write_path",
        ),
        ("core::ptr::drop_in_place$LT$$RF$mut$u20$u8$GT$", "core::ptr::drop_in_place<&mut u8>"),
        ("hello_pgo::main", "hello_pgo::main"),
    ],
)
def test_legacy_escapes_unescaped(cxxfilt: str, rust: str) -> None:
    assert coverage.unescape_legacy(cxxfilt) == rust


def test_the_c_functions_of_build_scripts_counted_with_and_without_training_counts() -> None:
    """The training profile of csys (a real ``llvm-profdata show --counts``, tests/data/cflags/: the training ran
    the checksum and the sum) against a bench that also runs ``csys cold``: each C function of the objects counted."""
    training = coverage.parse_counts((DATA / "cflags" / "profdata-show-counts-csys.txt").read_text())
    functions = {"csys": ["csys_cpp_sum", "csys_checksum", "csys_cold", "csys_file"]}
    bench = {"csys_checksum": 30, "csys_cold": 2, "_ZN4csys4main17h3631bc2884cd0cafE": 4}
    found = coverage.c_coverage(functions, bench, training)
    assert found == {
        "functions": 4,
        "with_training_counts": 2,
        "without_training_counts": 2,
        "bench_executed": 2,
        "bench_untrained": ["csys_cold"],
        "crates": [
            {
                "crate": "csys",
                "functions": 4,
                "with_training_counts": 2,
                "without_training_counts": 2,
                "bench_executed": 2,
                "bench_untrained": ["csys_cold"],
            }
        ],
    }
    assert coverage.c_coverage({}, bench, training)["functions"] == 0


def test_the_main_crates_executed_functions_of_two_targets_compare_as_paths() -> None:
    """x86_64 and aarch64 trainings name their functions with other symbol hashes (v0 names also carry the
    crate's disambiguator): compared as demangled paths, the crate's own functions only."""
    x86 = ["demo_server::main", "<demo_server::Cache as core::ops::Drop>::drop", "hyper::proto::h1::parse", "x::y"]
    arm = ["demo_server[5f1e2d3c4b5a6978]::main", "demo_server::waf::check", "<hyper::X as demo_server::T>::f"]
    a, b = coverage.crate_paths(x86, "demo_server"), coverage.crate_paths(arm, "demo_server")
    assert a == {"demo_server::main", "<demo_server::Cache as core::ops::Drop>::drop"}
    assert b == {"demo_server::main", "demo_server::waf::check"}
    compared = coverage.executed_overlap(sorted(a), sorted(b))
    assert compared == {"first": 2, "second": 2, "both": 1, "only_first": 1, "only_second": 1, "share": 1 / 3}
    assert coverage.executed_overlap([], [])["share"] == 1.0


def test_static_c_functions_of_one_name_counted_each_with_its_own_counts(tmp_path: Path) -> None:
    """Two C files, each with a ``static`` ``helper`` (as Oniguruma's encodings have, in bat 0.26.1's onig_sys):
    a real training runs ``used.c``'s and a bench runs ``other.c``'s too. Each is a function with its own counts
    (the profile names them ``<source>;helper``): not one name that the training's counts of one make 'trained'."""
    out = tmp_path / "target" / "x86_64-unknown-linux-gnu" / "release" / "build" / "encsys-0123456789abcdef" / "out"
    out.mkdir(parents=True)
    (tmp_path / "src").mkdir()
    for name, entry in (("used", "enc_used"), ("other", "enc_other")):
        (tmp_path / "src" / f"{name}.c").write_text(
            f"static __attribute__((noinline)) int helper(int x) {{ return x * 3 + {len(name)}; }}\n"
            f"int {entry}(int x) {{ return helper(x) + 1; }}\n"
        )
        obj = out / f"0123456789abcdef-{name}.o"
        subprocess.run(
            ["clang-22", "-O2", "-fprofile-generate", "-c", "-o", str(obj), f"src/{name}.c"], cwd=tmp_path, check=True
        )
    (tmp_path / "main.c").write_text(
        "int enc_used(int);\nint enc_other(int);\n"
        "int main(int argc, char **argv) { return (argc > 1 ? enc_other(argc) : enc_used(argc)) == 0; }\n"
    )
    program = tmp_path / "program"
    subprocess.run(
        ["clang-22", "-O2", "-fprofile-generate", "-o", str(program), "main.c", *map(str, sorted(out.glob("*.o")))],
        cwd=tmp_path,
        check=True,
    )

    def profile(name: str, *args: str) -> dict[str, int]:
        raw, merged = tmp_path / f"{name}.profraw", tmp_path / f"{name}.profdata"
        subprocess.run([str(program), *args], env={"LLVM_PROFILE_FILE": str(raw)}, check=True)
        subprocess.run(["llvm-profdata-22", "merge", "-o", str(merged), str(raw)], check=True)
        shown = ["llvm-profdata-22", "show", "--all-functions", "--counts", str(merged)]
        return coverage.parse_record_counts(subprocess.run(shown, capture_output=True, text=True, check=True).stdout)

    training, bench = profile("training"), profile("bench", "other")
    assert training["src/used.c;helper"] > 0 and training["src/other.c;helper"] == 0, training
    functions = coverage.c_functions(tmp_path / "target", "x86_64-unknown-linux-gnu", training)
    assert functions == {"encsys": ["enc_other", "enc_used", "src/other.c;helper", "src/used.c;helper"]}
    found = coverage.c_coverage(functions, bench, training)
    assert (found["functions"], found["with_training_counts"], found["without_training_counts"]) == (4, 2, 2)
    assert found["bench_untrained"] == ["enc_other", "src/other.c;helper"], found
    assert coverage.by_symbol(training)["helper"] == training["src/used.c;helper"]  # the hot list's names: symbols
