"""What a lab file's object may define, import and run (./grade's symbol rule; docs/grading.md).

A lab object is linked into the rank program beside the grading kit, so whatever it defines or runs
is the program's. The rule reads the object (nm, readelf, objdump), never its source, and refuses:

- code that runs outside the lab's functions: constructors and destructors of globals
  (.init_array, .ctors, .fini_array, ...), and registrations to run at exit (atexit, thread_local
  destructors; a function-local static's destructor is allowed: see DENIED);
- definitions that are not the lab's own: a symbol with external linkage that the file's skeleton
  does not define (a helper must be static or in an anonymous namespace), and any definition, weak or
  strong, of a symbol that a linked library exports and the kit does not define (a replaced
  std::chrono::steady_clock::now, clock_gettime or operator new would change the whole program: the
  recorder's clock, the result file). A template instance (an inline member of std::string, say) may be
  defined: its body comes from the headers, since an explicit specialization (`template <>`, the only way
  to give one a body of the file's own) is refused in the source (explicit_specializations). The kit is
  linked before the lab objects, so where both define an inline function or a template instance, the
  kit's copy is the program's;
- imports outside an allow-list: the engine's API (tpsp::), the C++ standard library (std::, its ABI
  runtime), fmt, the C math and string functions, and printing to stdout/stderr; everything else
  (glibc's aliases such as __open or __libc_system, getdents64, sockets, ...) is refused by name;
- on top of the allow-list, named parts of the engine and the standard library that a lab's code
  never needs and a dishonest one does (DENIED: the recorder, the device tables, files, processes,
  the environment), each with the reason the student reads;
- a system-call instruction in the code.
"""
from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

# Named refusals, each with its reason (checked on the demangled names an object defines or imports):
# what a lab's code has no use for and a dishonest one needs. The allow-list below refuses more; these keep
# a reason the student can act on for the common cases.
DENIED = [
    # Every Recorder member: writing it forges the evidence, reading it lets a forgery match the real calls
    # (attack12: a device span placed inside a gather's issue-to-wait window); lab code never needs it.
    (re.compile(r"tpsp::trace::Recorder::"),
     "reads or writes the communication record (the grader's evidence of what was communicated)"),
    (re.compile(r"tpsp::trace::(install|installed|Span::Span)\b"),
     "writes compute spans (the grader's evidence of overlap)"),
    # A device's tables decide how storage is copied and how spans are timed (a fake clock forges them).
    (re.compile(r"tpsp::register_device_hooks\b|tpsp::device_hooks\b|tpsp::require_device_hooks\b|"
                r"tpsp::ops::register_device_ops\b|tpsp::ops::device_ops\b|tpsp::emulated::|tpsp::runtime::|"
                r"tpsp::cuda::register_backend\b"),
     "installs or reaches a device's storage, ops or clock (the run's device is the grader's choice)"),
    (re.compile(r"tpsp::checkers::|tpsp::io::|write_chrome_trace"),
     "calls the rank program's own code (the scenarios, the dumps, result files)"),
    # The relay's own requests (phase marks, scenario inputs): the scenario code's, never a lab's. The relay
    # decides what each rank receives whatever it is asked (checkers/input_server.h); this keeps a reason.
    (re.compile(r"tpsp::comm::RelayBackend::(mark|input|connect_world)\b"),
     "talks to the relay past the process group (phase marks and scenario inputs are the scenario's)"),
    # A transport of the lab's own: under ./grade's sandbox the ranks have no network, but in a container
    # without namespaces (the Gradescope autograder) the engine's TCP store carried a forged g's partials
    # past the witness (found by an attack, 2026-12-08: 10 of 10 with g's all-reduce on zeros).
    (re.compile(r"tpsp::comm::(TcpStore|TcpStoreServer|GlooBackend|GlooRendezvous|Nccl\w*|RelayBackend::RelayBackend|"
                r"init_from_env|cpu_backend_from_env|options_from_env)\b"),
     "opens a transport of its own (a store, a Gloo or NCCL world, a relay connection): every byte between "
     "ranks goes through the process group it is given"),
    # The training data loader opens any path it is given and returns its bytes (found by an attack,
    # 2026-12-02: ByteDataset on a sibling run's dump, whose path /proc/self/cmdline names).
    (re.compile(r"tpsp::train::"), "reads files through the engine's data loader (a lab's code reads only tensors)"),
    (re.compile(r"\bbasic_(o|i|)fstream\b|\bbasic_filebuf\b|\bstd::filesystem::|"
                r"^(fopen|fopen64|freopen|freopen64|fdopen|open|open64|openat|openat64|__open_2|__open64_2|"
                r"__openat_2|creat|creat64|opendir|fdopendir|readlink|readlinkat|unlink|unlinkat|rename|renameat|"
                r"renameat2|mkdir|mkdirat|chdir|fchdir|chroot|truncate|ftruncate|"
                # entries made or listed without opening a file: names are a channel too (attack o, r)
                r"symlink|symlinkat|link|linkat|mkfifo|mkfifoat|mknod|mknodat|glob|glob64|globfree|globfree64|"
                r"scandir|scandir64|scandirat|scandirat64|readdir|readdir64|nftw|nftw64|ftw|ftw64|"
                r"stat|stat64|lstat|lstat64|fstatat|fstatat64|statx|__xstat|__xstat64|__lxstat|__lxstat64|"
                r"__fxstatat|__fxstatat64|statfs|statfs64|statvfs|statvfs64|access|faccessat|euidaccess|eaccess|"
                r"chmod|fchmod|fchmodat|lchmod|chown|fchown|fchownat|lchown|utime|utimes|lutimes|futimes|"
                r"utimensat|futimens|setxattr|lsetxattr|fsetxattr|getxattr|lgetxattr|fgetxattr|listxattr|"
                r"llistxattr|flistxattr|removexattr|lremovexattr|fremovexattr|realpath|canonicalize_file_name)$"),
     "opens files or folders (a lab's code reads and writes only tensors)"),
    (re.compile(r"^(fork|_Fork|vfork|clone|clone3|execv|execve|execveat|execvp|execvpe|execl|execlp|execle|fexecve|"
                r"posix_spawn|posix_spawnp|system|popen|daemon|setsid|setpgid|ptrace|kill|tgkill|tkill|killpg|"
                r"signal|sigaction|prctl|unshare|setns|process_vm_readv|process_vm_writev|pidfd_open|dlopen|dlsym|"
                r"dlvsym|syscall|wordexp|wordfree)$"),
     "starts or controls processes, or makes raw system calls"),
    (re.compile(r"^(socket|socketpair|connect|bind|listen|accept|accept4|sendto|recvfrom|sendmsg|recvmsg|mmap|mmap64|"
                r"mprotect|shm_open|shmget|shmat|msgget|semget|mq_open|getenv|secure_getenv|environ|__environ|"
                r"setenv|unsetenv|putenv|clearenv|"
                r"program_invocation_name|program_invocation_short_name|__progname|__libc_argv|"
                r"sigqueue|sigtimedwait|sigwaitinfo|sigwait|sigprocmask|pthread_sigmask|pthread_kill|"
                r"sched_setaffinity|sched_getaffinity|setpriority|getpriority|prlimit|prlimit64|"
                r"setrlimit|getrlimit|ioprio_set|ioprio_get)$"),
     "reaches outside the process group's calls (sockets, shared memory, the environment)"),
    (re.compile(r"\b__basic_file\b"), "opens files or folders (a lab's code reads and writes only tensors)"),
    # Code that runs outside the lab's calls: another thread, or a handler the library calls later.
    (re.compile(r"std::(thread|jthread)\b|std::__future_base|std::async\b|std::set_(terminate|new_handler|unexpected)\b|"
                r"std::get_(terminate|new_handler)\b"),
     "runs code outside the lab's calls (a thread, or a handler the library calls later)"),
    # Code registered to run at exit runs after the lab's functions returned (attack: result.json rewritten
    # by an exit handler). A function-local static's destructor (__cxa_atexit, emitted by the compiler) is
    # allowed: a lab object can open no file and make no system call, so code at exit can change nothing
    # the grader reads.
    (re.compile(r"^(atexit|on_exit|at_quick_exit|__cxa_thread_atexit|__cxa_thread_atexit_impl)$"),
     "registers code to run at exit (atexit, a thread_local with a destructor)"),
]

# Imports a lab's code may have, on the demangled name (DENIED still applies to them).
ALLOWED_NAMESPACES = ("tpsp::", "std::", "__gnu_cxx::", "__cxxabiv1::", "fmt::", "nlohmann::")
ALLOWED_RUNTIME = re.compile(
    r"^(operator (new|delete)(\[\])?|__cxa_(allocate_exception|free_exception|throw|rethrow|begin_catch|end_catch|"
    r"guard_acquire|guard_release|guard_abort|pure_virtual|deleted_virtual|bad_cast|bad_typeid|"
    r"throw_bad_array_new_length|get_exception_ptr|current_exception_type|call_unexpected)|"
    r"__cxa_atexit|__dso_handle|__gxx_personality_v0|_Unwind_Resume|__stack_chk_fail|__libc_single_threaded|__tls_get_addr|"
    r"_GLOBAL_OFFSET_TABLE_|__errno_location|abort|"
    # C strings and memory
    r"mem(cpy|move|set|cmp|chr)|str(len|nlen|cmp|ncmp|chr|rchr|str|cpy|ncpy|cat|ncat|tol|toul|toll|toull|tod|tof|told)|"
    r"__isoc23_strto(l|ul|ll|ull)|"
    # printing to the rank's own stdout and stderr (no way to open another stream is allowed)
    r"s?n?printf|v?s?n?printf|fprintf|vfprintf|puts|fputs|fputc|putc|putchar|fwrite|fflush|stdout|stderr|"
    r"__printf_chk|__fprintf_chk|__sprintf_chk|__snprintf_chk|__vsnprintf_chk|"
    # C math (libm), float and double and long double forms
    r"(a?(sin|cos|tan)h?|atan2|exp|exp2|expm1|log|log2|log10|log1p|pow|sqrt|cbrt|hypot|fabs|floor|ceil|trunc|"
    r"round|lround|llround|nearbyint|rint|lrint|llrint|fmod|remainder|fmax|fmin|fma|fdim|erf|erfc|tgamma|"
    r"lgamma|frexp|ldexp|scalbn|modf|copysign|nextafter|nan)[fl]?)$")

# Sections whose code runs before main() or after it, outside the lab's functions (by name or by type),
# and the sections a compiled lab file may hold at all: code, data, exception tables, debug information.
CONSTRUCTOR_SECTION = re.compile(r"^\.(init_array|fini_array|preinit_array|ctors|dtors|init|fini)(\.|$)")
CONSTRUCTOR_TYPES = {"INIT_ARRAY", "FINI_ARRAY", "PREINIT_ARRAY"}
ALLOWED_SECTION = re.compile(r"^(\.text|\.rodata|\.data|\.bss|\.tdata|\.tbss|\.rela?\.|\.group$|\.eh_frame$|"
                             r"\.gcc_except_table|\.note|\.comment$|\.debug|\.zdebug|\.symtab$|\.strtab$|"
                             r"\.shstrtab$|$)")
SYSCALL_INSTRUCTION = re.compile(r"\s(syscall|sysenter|int\s+\$0x80|svc\s+#?0)\b")
STRONG = set("TDBRGSC")  # nm's global definitions that are not weak (W, V) or unique (u)


@dataclass
class LinkContext:
    """What the rule compares a lab object with: the symbols its skeleton defines with external linkage
    (the lab's functions), the symbols each linked shared library exports, and those the kit defines."""
    exports: set[str] = field(default_factory=set)
    library_symbols: dict[str, str] = field(default_factory=dict)
    kit_symbols: set[str] = field(default_factory=set)


def _nm(args: list[str], path: Path) -> list[tuple[str, str]]:
    """(mangled name, type letter) of each symbol nm lists."""
    out = subprocess.run(["nm", "--format=posix", *args, str(path)], capture_output=True, text=True).stdout
    rows = []
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 2 and not line.endswith(":"):
            rows.append((parts[0], parts[1]))
    return rows


def demangle(names: list[str]) -> dict[str, str]:
    if not names:
        return {}
    out = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True).stdout.splitlines()
    return dict(zip(names, out)) if len(out) == len(names) else {n: n for n in names}


def defined_globals(path: Path) -> list[tuple[str, str]]:
    return [(n, t) for n, t in _nm(["--defined-only", "--extern-only"], path) if t not in "Uvw"]


def library_exports(libraries: list[Path]) -> dict[str, str]:
    """{symbol: library} for the dynamic symbols each shared library defines (versions stripped)."""
    out: dict[str, str] = {}
    for lib in libraries:
        for name, kind in _nm(["-D", "--defined-only"], lib):
            if kind not in "Uvw":
                out.setdefault(name.split("@")[0], lib.name)
    return out


def qualified_name(demangled: str) -> str:
    """The function or object a demangled symbol names, without its return type, template arguments
    and parameters: "std::basic_ostream<char>& std::basic_ostream<char>::put(char)" → "std::basic_ostream::put"."""
    for prefix in ("typeinfo name for ", "typeinfo for ", "vtable for ", "VTT for ", "guard variable for ",
                   "construction vtable for ", "non-virtual thunk to ", "virtual thunk to "):
        if demangled.startswith(prefix):
            demangled = demangled[len(prefix):]
    plain, depth = [], 0
    for i, c in enumerate(demangled):
        if c == "(" and depth == 0 and not demangled[:i].endswith("operator"):
            break
        if c == "<" and not demangled[:i].endswith(("operator", "operator<")):
            depth += 1
        elif c == ">" and depth > 0:
            depth -= 1
        elif depth == 0:
            plain.append(c)
    text = "".join(plain).strip()
    return text if text.startswith("operator ") else text.split(" ")[-1]


def allowed_import(demangled: str) -> bool:
    name = qualified_name(demangled)
    return name.startswith(ALLOWED_NAMESPACES) or bool(ALLOWED_RUNTIME.match(name))


def check_object(obj: Path, source: Path, ctx: LinkContext) -> str:
    """"" when the object of a submission's lab file keeps to the rule; else the rules broken, with the
    symbols (what the student reads)."""
    found: dict[str, set[str]] = {}
    sections = subprocess.run(["readelf", "-S", "-W", str(obj)], capture_output=True, text=True).stdout
    for index, name, kind in re.findall(r"^\s*\[\s*(\d+)\]\s+(\S*)\s+(\S+)", sections, re.M):
        if index == "0":  # the null section
            continue
        if CONSTRUCTOR_SECTION.match(name) or kind in CONSTRUCTOR_TYPES:
            found.setdefault("runs code before main() or at exit (a global object with a constructor or "
                             "destructor, or __attribute__((constructor))): keep such values local", set()).add(name)
        elif not ALLOWED_SECTION.match(name):
            found.setdefault("holds a section of its own (a lab file compiles to code and data only)", set()).add(name)
    for why, names in linkage_tricks(obj).items():
        found.setdefault(why, set()).update(names)
    defined = defined_globals(obj)
    imported = [n for n, t in _nm(["--undefined-only"], obj)]
    names = demangle([n for n, _ in defined] + imported)
    for name, kind in defined:
        pretty = names.get(name, name)
        if name in ctx.library_symbols and name not in ctx.kit_symbols:
            found.setdefault(f"replaces a function of a library ({ctx.library_symbols[name]}): a lab file may "
                             "not define what the program links from elsewhere", set()).add(pretty)
        elif kind in STRONG and name not in ctx.exports:
            found.setdefault("defines with external linkage what is not one of its lab's functions (make a "
                             "helper static or put it in an anonymous namespace)", set()).add(pretty)
    for name in imported:
        pretty = names.get(name, name)
        if not allowed_import(pretty):
            found.setdefault("calls what a lab's code may not use (allowed: the engine's API, the C++ standard "
                             "library, C math and strings, printing to stdout/stderr)", set()).add(pretty)
    for name in [n for n, _ in defined] + imported:
        bare = qualified_name(names.get(name, name))
        full = names.get(name, name)
        for pattern, why in DENIED:
            if pattern.search(full) or pattern.search(bare):
                found.setdefault(why, set()).add(bare)
    code = subprocess.run(["objdump", "-d", "--no-show-raw-insn", str(obj)], capture_output=True, text=True).stdout
    if SYSCALL_INSTRUCTION.search(code):
        found.setdefault("makes raw system calls", set()).add("a syscall instruction")
    if not found:
        return ""
    rel = source.relative_to(source.parents[1])
    lines = [f"  {why}: {', '.join(sorted(symbols)[:6])}" for why, symbols in found.items()]
    return f"{rel} may not be used: it\n" + "\n".join(lines) + (
        "\n(a lab's code computes with tensors and the process group's calls only: docs/grading.md)")


def linkage_tricks(obj: Path) -> dict[str, set[str]]:
    """Symbols bound in ways only a trick needs: an indirect function (its resolver runs before main), and
    a weak or unique definition outside a COMDAT group (an inline function or a template instance always
    sits in one; `__attribute__((weak))` or an asm label does not, and could replace a library's symbol)."""
    groups = subprocess.run(["readelf", "-g", "-W", str(obj)], capture_output=True, text=True).stdout
    in_group = {int(i) for i in re.findall(r"^\s*\[\s*(\d+)\]\s+\S", groups, re.M)}
    table = subprocess.run(["readelf", "-s", "-W", str(obj)], capture_output=True, text=True).stdout
    found: dict[str, set[str]] = {}
    for kind, bind, ndx, name in re.findall(r"^\s*\d+:\s+\S+\s+\d+\s+(\S+)\s+(\S+)\s+\S+\s+(\S+)\s+(\S*)",
                                            table, re.M):
        if kind in ("IFUNC", "GNU_IFUNC"):
            found.setdefault("defines an indirect function (its resolver runs before main())", set()).add(name)
        elif bind in ("WEAK", "UNIQUE") and ndx.isdigit() and int(ndx) not in in_group:
            found.setdefault("defines a weak symbol outside a COMDAT group (__attribute__((weak)) or an asm label): "
                             "it could replace a library's", set()).add(name)
    return found


EXPLICIT_SPECIALIZATION = re.compile(r"\btemplate\s*<\s*>")
# In the submission's own lines after preprocessing: inline assembly and asm labels, linkage and placement
# attributes, explicit instantiations (a library template compiled under the file's own macros).
SOURCE_REFUSALS = [
    (re.compile(r"\b(asm|__asm|__asm__)\b"), "inline assembly or an asm label"),
    # Every spelling: __attribute__((...)) and __attribute((...)), [[gnu::...]] and [[using gnu: ...]] (the
    # last two found passing by a reviewer, 2026-12-07).
    (re.compile(r"(__attribute(__)?\s*\(\(|\[\[\s*(using\s+)?(gnu|gcc|__gnu__|__gcc__)\s*:)[^;{]*\b_*(ifunc|alias|weakref|"
                r"weak|section|symver|"
                r"constructor|destructor|init_priority|visibility|naked|used|retain)_*\b"),
     "an attribute that places or binds code (section, weak, alias, ifunc, constructor, ...)"),
    (re.compile(r"(^|[;{}])\s*(extern\s+)?template\s+(?!<)"), "an explicit instantiation (template without <...>)"),
]
RESERVED_MACRO = re.compile(r"^\s*#\s*(define|undef)\s+((?:__|_[A-Z])\w*)", re.M)


PUBLIC_HEADERS = ("/usr/include/", "/usr/lib/gcc/", "/usr/local/include/", "/grade/kit/include/")
LINE_DIRECTIVE = re.compile(r"^\s*#\s*(line\b|\d)", re.M)


def normalized(text: str) -> str:
    """Source text as the preprocessor reads its directives: backslash-newlines joined, comments turned
    into a space, the digraph %: read as #."""
    text = text.replace("\\\n", "").replace("%:", "#")
    return re.sub(r"/\*.*?\*/|//[^\n]*", " ", text, flags=re.S)


def own_regions(preprocessed: str) -> dict[str, str]:
    """{file: its lines joined by spaces} for every file of the preprocessed text that is not a public
    header. A path is normalised first, so `<../../src/x.cpp>` through the kit's include folder is the
    submission's own; a line marker written in the source is refused apart (LINE_DIRECTIVE)."""
    regions: dict[str, list[str]] = {}
    current = ""
    for line in preprocessed.splitlines():
        marker = re.match(r'^# (\d+) "([^"]*)"', line)
        if marker:
            current = os.path.normpath(marker.group(2)) if marker.group(2).startswith("/") else marker.group(2)
            continue
        if not current.startswith(PUBLIC_HEADERS) and not current.startswith("<"):
            regions.setdefault(current, []).append(line)
    return {f: " ".join(lines) for f, lines in regions.items()}


def source_refusals(preprocessed: str, own_files: tuple[str, ...], raw_texts: list[str]) -> list[str]:
    """What the submission's source holds that only a trick needs, each with the file it is in. The
    preprocessed text of every file that is not a public header is checked with its lines joined (a
    pattern split over lines is still one), and the raw files for line directives and reserved macros.
    `own_files` is kept for the callers' report of explicit specializations by line."""
    out = [f"an explicit specialization (template <>) at {where}"
           for where in explicit_specializations(preprocessed, own_files)[:3]]
    for name, text in own_regions(preprocessed).items():
        short = "/".join(name.split("/")[-2:])
        if EXPLICIT_SPECIALIZATION.search(text) and not out:
            out.append(f"an explicit specialization (template <>) in {short}")
        for pattern, what in SOURCE_REFUSALS:
            if pattern.search(text):
                out.append(f"{what} in {short}")
    for text in raw_texts:
        plain = normalized(text)
        if LINE_DIRECTIVE.search(plain):
            out.append("a line directive (#line or # N \"file\"): the file must say where its lines are from")
        for m in RESERVED_MACRO.finditer(plain):
            out.append(f"a #{m.group(1)} of the reserved name {m.group(2)} (a name of the library's own macros)")
    return out[:8]


def explicit_specializations(preprocessed: str, own_files: tuple[str, ...]) -> list[str]:
    """The lines of the submission's own files (by the preprocessor's line markers) that begin an explicit
    specialization: a template instance with a body of the file's own could replace the library's."""
    found, current, line_no = [], "", 0
    for line in preprocessed.splitlines():
        marker = re.match(r'^# (\d+) "([^"]*)"', line)
        if marker:
            line_no, current = int(marker.group(1)), marker.group(2)
            continue
        if current.startswith(own_files) and EXPLICIT_SPECIALIZATION.search(line):
            found.append(f"{'/'.join(current.split('/')[-2:])}:{line_no}")
        line_no += 1
    return found

