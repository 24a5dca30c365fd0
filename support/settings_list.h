// The one list of the environment variables hjit reads: every HJIT_* variable, its type, its
// default and what it means. support/settings.h reads them through this table (each value checked
// where it is read, a bad one a ValueError naming the variable), hjit::settings() and
// `hjit-onnx --settings` print it, and docs/settings.md is generated from it (the test suite checks
// the page is current: `make settings-doc` writes it).
//
// X(Id, "NAME", kind, "default", "what it takes", scope, secret, "what it does")
//   kind:    Text, Path, Count (a whole number >= 0), Seconds (a number > 0), Flag (0 or 1),
//            Choice (one of the words of "what it takes", separated by |)
//   default: the value used when the variable is unset (a description in parentheses where the
//            default is computed: "(ld on PATH)")
//   scope:   Library (any program linked with hjit), Tools (hjit-tune, hjit-bench), Tests (the test
//            suite and its scripts)
//   secret:  its value is never printed
#pragma once

#define HJIT_SETTINGS(X)                                                                                                   \
  X(Log, "HJIT_LOG", Choice, "warn", "trace|debug|info|warn|error|critical|off", Library, false,                           \
    "How much hjit logs on stderr: debug shows traces, compilations and cache decisions with their timings.")             \
  X(CacheDir, "HJIT_CACHE_DIR", Path, "($XDG_CACHE_HOME/hjit, else ~/.cache/hjit)", "a directory; empty: no disk cache",   \
    Library, false, "The disk tier of the compile cache: compiled pipelines any later process loads instead of compiling.") \
  X(CacheMaxMb, "HJIT_CACHE_MAX_MB", Count, "2048", "megabytes", Library, false,                                           \
    "The most the disk cache holds; least recently used entries are evicted first.")                                      \
  X(CacheRedis, "HJIT_CACHE_REDIS", Text, "", "host:port", Library, false,                                                 \
    "A Redis server shared by a fleet as the compile cache's tier behind the disk (needs HJIT_CACHE_KEY_FILE or "         \
    "HJIT_CACHE_KEY: entries are tagged with the fleet's key).")                                                          \
  X(CacheKeyFile, "HJIT_CACHE_KEY_FILE", Path, "", "a file only its owner can read", Library, false,                      \
    "The file holding the shared cache's key (preferred to HJIT_CACHE_KEY).")                                             \
  X(CacheKey, "HJIT_CACHE_KEY", Text, "", "16 bytes or more", Library, true,                                               \
    "The shared cache's key itself, where no key file is set.")                                                           \
  X(TuningDb, "HJIT_TUNING_DB", Path, "", "a database hjit-tune wrote", Library, false,                                    \
    "The tuning database jit functions and modules at opt_level 1 or 2 use when their options name none.")                \
  X(ParamModel, "HJIT_PARAM_MODEL", Path, "(the model shipped in the library)", "a file hjit-tune --fit-model wrote, or off", \
    Library, false, "The fitted model that picks the built-in schedule's parameters for a CPU pipeline.")                 \
  X(Eager, "HJIT_EAGER", Choice, "compiled", "compiled|plain", Library, false,                                              \
    "How eager matmuls and convolutions big enough to gain run: compiled pipelines, or the plain reference kernels.")     \
  X(DebugNans, "HJIT_DEBUG_NANS", Flag, "0", "0|1", Library, false,                                                        \
    "1 checks every jitted call for NaNs and infinities, as JitOptions::debug_nans.")                                     \
  X(Profile, "HJIT_PROFILE", Flag, "0", "0|1", Library, false,                                                             \
    "1 builds Halide's sampling profiler into every CPU pipeline hjit compiles: at exit each pipeline prints the time "   \
    "of each of its stages, their threads and their memory (a separate entry in the compile cache).")                    \
  X(GuardPages, "HJIT_GUARD_PAGES", Choice, "off", "off|after|before", Library, false,                                   \
    "A debugging aid: after puts the end of every tensor and temporary against an inaccessible page, before its start; a " \
    "compiled loop that reads or writes past its buffer then crashes where it strays. Slow.")                               \
  X(DistTimeout, "HJIT_DIST_TIMEOUT", Seconds, "(dist::InitOptions::timeout: 300)", "seconds", Library, false,             \
    "How long a collective waits for the other ranks before raising DistributedError.")                                   \
  X(MemoryLimitMb, "HJIT_MEMORY_LIMIT_MB", Count, "(three quarters of physical memory)", "megabytes; 0: the default", Library,   \
    false, "The most memory hjit's tensors and compiled temporaries take at once (hjit::set_memory_limit): an allocation "  \
    "past it is a ResourceError, raised before the allocation.")                                                          \
  X(Linker, "HJIT_LINKER", Path, "(ld on PATH)", "an ld program", Library, false,                                           \
    "The linker that makes compiled pipelines shared objects; a path that is not a program stands for a machine "        \
    "without one (Halide's in-process JIT, no disk cache).")                                                              \
  X(Threads, "HJIT_THREADS", Count, "(the CPUs the process may run on)", "threads; 0: the default", Library, false,          \
    "How many threads hjit's parallel loops use (compiled pipelines and eager kernels), at most the CPUs the process may " \
    "run on; JitOptions::threads, ModuleOptions::threads and hjit::set_num_threads set it per function, module or "       \
    "process. The compiled code is the same whatever it is, and so are the results. An exported CPU library reads it "    \
    "too, at its first parallel loop.")                                                                                   \
  X(PartitionWork, "HJIT_PARTITION_WORK", Count, "96", "nodes of work", Library, false,                                    \
    "A graph with this much work (a contraction 4, a reduction 2, any other node 1) compiles in two halves at once, "      \
    "one in a child process.")                                                                                            \
  X(PartMaxCost, "HJIT_PART_MAX_COST", Count, "384", "element-wise ops", Library, false,                                   \
    "The most compile cost one part of a big graph may have (a contraction 24, a reduction 4).")                          \
  X(HalidePluginDir, "HJIT_HALIDE_PLUGIN_DIR", Path, "(Debian's Halide 14 plugin directory)", "a directory", Library,      \
    false, "Where Halide's autoscheduler plugins and Adams2019's tools are loaded from.")                                  \
  X(Adams2019MaxFuncs, "HJIT_ADAMS2019_MAX_FUNCS", Count, "20", "stages; 0: any", Library, false,                          \
    "The largest pipeline Adams2019 is tried on (its search grows fast with the stages).")                                \
  X(TuneWorker, "HJIT_TUNE_WORKER", Path, "(hjit-tune beside the library)", "the hjit-tune program", Tools, false,          \
    "The program tuning runs measure candidates in.")                                                                     \
  X(TuneFault, "HJIT_TUNE_FAULT", Text, "", "kind:text;... (crash, hang, wrong, lucky, slow)", Tests, false,               \
    "Faults the tuning worker commits for requests whose text contains `text`: how the test suite shows a tuning run "    \
    "survives them.")                                                                                                      \
  X(BenchOrt, "HJIT_BENCH_ORT", Path, "(../shared/peers/ort_time.js beside the source tree)", "ort_time.js; empty: none",    \
    Tools, false, "hjit-bench --models and --busy: the script that times a model with ONNX Runtime's CPU engine (a peer; "  \
    "its columns read - without it).")                                                                                    \
  X(BenchGptOnly, "HJIT_BENCH_GPT_ONLY", Count, "0", "blocks", Tools, false,                                                \
    "hjit-bench --compile-scaling: only the GPT training step of this many blocks.")                                      \
  X(TestConfig, "HJIT_TEST_CONFIG", Text, "O1", "O0, O1, an autoscheduler's name, CUDA-O1, OpenCL-O1, ...", Tests, false,   \
    "The configuration the differential and golden tests run.")                                                           \
  X(TestFull, "HJIT_TEST_FULL", Flag, "0", "0|1", Tests, false, "1 runs every case of every differential configuration.") \
  X(TestFault, "HJIT_TEST_FAULT", Flag, "0", "0|1", Tests, false, "1 runs the distributed tests that stop or kill a rank.") \
  X(DeviceBundle, "HJIT_DEVICE_BUNDLE", Path, "", "a directory", Tests, false,                                             \
    "The directory the CUDA differential configuration writes the GPU machine's bundle to (make device-bundle).")                                                          \
  X(TestSeed, "HJIT_TEST_SEED", Count, "(each case's own seed)", "a number", Tests, false,                                   \
    "The seed of test_hostile's structure-aware mutations: another explores other models (a crash found becomes a case).") \
  X(FuzzMutations, "HJIT_FUZZ_MUTATIONS", Count, "(each case's own count)", "mutations", Tests, false,                       \
    "The most mutations a fuzz case makes of its file format (CI's sanitizer run: 1000).")                                                    \
  X(OnnxTestdata, "HJIT_ONNX_TESTDATA", Path, "/usr/share/libonnx-testdata/data", "a directory", Tests, false,               \
    "ONNX's conformance cases.")                                                                                           \
  X(OnnxCases, "HJIT_ONNX_CASES", Text, "", "a regular expression of case names", Tests, false,                                            \
    "Only the ONNX conformance cases it matches.")                                                             \
  X(OnnxReport, "HJIT_ONNX_REPORT", Path, "", "a file", Tests, false,                                                      \
    "Where the ONNX conformance test writes each case's outcome.")                                                         \
  X(GoldenAll, "HJIT_GOLDEN_ALL", Flag, "0", "0|1", Tests, false,                                                          \
    "1 reports every failing PyTorch golden case, not the first four of an op.")
