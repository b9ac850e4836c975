/* The CPU's own atomic instructions on aligned int64 words, by address: the compiled form of
 * aiorma/transport/mpi/cpu_atomics.py (see there for why and when the transport uses them).
 *
 * The same four operations as the ctypes form, with the same arguments and results, each a
 * single locked instruction (a compare-and-swap loop for fetch_max).  Through ctypes a call costs
 * 1.4-2.4 us on the 2-core VM these numbers come from, more than the lock protocol's own steps;
 * a call of a METH_FASTCALL function costs a tenth of that.
 *
 * Values are taken modulo 2**64 and read back as signed: the words wrap like int64, as they do
 * through ctypes.  The interpreter lock is held throughout: one instruction needs no letting go.
 *
 * Three more, which the ctypes form has no counterpart of: store_words, a small put as word stores
 * into a peer's mapped memory (without it, puts stay MPI's), accumulate_elements, the accumulate
 * family into a window's memory under a lock word of its target's (without it, MPI's), and
 * words_changed, a poll's look at a control region (without it, MPI_Win_sync and a copy).
 */
/* The accumulate loops below vectorize at -O3 (the build's flags are -O2 for every extension). */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("O3")
#endif
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <sched.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

static int
word_arg(PyObject *arg, int64_t **word)
{
    void *address = PyLong_AsVoidPtr(arg);
    if (address == NULL && PyErr_Occurred())
        return -1;
    if (address == NULL || ((uintptr_t)address & 7) != 0) {
        PyErr_SetString(PyExc_ValueError, "the address of an aligned int64 word is required");
        return -1;
    }
    *word = (int64_t *)address;
    return 0;
}

static int
value_arg(PyObject *arg, int64_t *value)
{
    unsigned long long bits = PyLong_AsUnsignedLongLongMask(arg);
    if (bits == (unsigned long long)-1 && PyErr_Occurred())
        return -1;
    *value = (int64_t)bits;
    return 0;
}

/* (address, value[, order]): the ctypes form takes the memory order; every call is SEQ_CST. */
static int
word_value_args(PyObject *const *args, Py_ssize_t nargs, const char *name, int64_t **word,
                int64_t *value)
{
    if (nargs != 2 && nargs != 3) {
        PyErr_Format(PyExc_TypeError, "%s() takes (address, value[, order])", name);
        return -1;
    }
    if (nargs == 3 && PyLong_AsLong(args[2]) != __ATOMIC_SEQ_CST) {
        if (!PyErr_Occurred())
            PyErr_Format(PyExc_ValueError, "%s(): only the sequentially consistent order (5)", name);
        return -1;
    }
    if (word_arg(args[0], word) < 0 || value_arg(args[1], value) < 0)
        return -1;
    return 0;
}

static PyObject *
exchange(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    int64_t *word, value;
    if (word_value_args(args, nargs, "exchange", &word, &value) < 0)
        return NULL;
    return PyLong_FromLongLong(__atomic_exchange_n(word, value, __ATOMIC_SEQ_CST));
}

static PyObject *
fetch_add(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    int64_t *word, value;
    if (word_value_args(args, nargs, "fetch_add", &word, &value) < 0)
        return NULL;
    /* Through unsigned arithmetic: wrapping, never signed overflow. */
    return PyLong_FromLongLong(
        (int64_t)__atomic_fetch_add((uint64_t *)word, (uint64_t)value, __ATOMIC_SEQ_CST));
}

static PyObject *
compare_exchange(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    int64_t *word, compare, value;
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "compare_exchange() takes (address, compare, value)");
        return NULL;
    }
    if (word_arg(args[0], &word) < 0 || value_arg(args[1], &compare) < 0
        || value_arg(args[2], &value) < 0)
        return NULL;
    /* On failure the word's value is written into ``compare``; on success it was ``compare``:
     * the old value either way. */
    __atomic_compare_exchange_n(word, &compare, value, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
    return PyLong_FromLongLong(compare);
}

static PyObject *
fetch_max(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    int64_t *word, value;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "fetch_max() takes (address, value)");
        return NULL;
    }
    if (word_arg(args[0], &word) < 0 || value_arg(args[1], &value) < 0)
        return NULL;
    int64_t old = __atomic_load_n(word, __ATOMIC_SEQ_CST);
    while (old < value
           && !__atomic_compare_exchange_n(word, &old, value, 1, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
        ;  /* a failed exchange reloaded ``old`` */
    return PyLong_FromLongLong(old);
}

/* store_words(destination, offset, source[, fence]): the bytes of ``source`` into
 * ``destination`` from byte ``offset`` on (both C-contiguous buffers, the destination writable),
 * each aligned 8-byte word by one store of its own; with a true ``fence``, a full memory barrier
 * after them (what MPI_Win_sync is for memory shared this way, without an MPI call).  A put into a peer's memory mapped here, where the peer's readers
 * may load a word while it lands (a signal's words, LL words): a copy by memcpy may move a word
 * in pieces (``rep movsb``, overlapping vector moves), one word store never does.  Unaligned
 * copies (no words to keep whole) are a memcpy. */
static PyObject *
store_words(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3 && nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "store_words() takes (destination, offset, source[, fence])");
        return NULL;
    }
    int fence = nargs == 4 ? PyObject_IsTrue(args[3]) : 0;
    if (fence < 0)
        return NULL;
    Py_ssize_t offset = PyLong_AsSsize_t(args[1]);
    if (offset == -1 && PyErr_Occurred())
        return NULL;
    Py_buffer out, in;
    if (PyObject_GetBuffer(args[0], &out, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0)
        return NULL;
    if (PyObject_GetBuffer(args[2], &in, PyBUF_C_CONTIGUOUS) < 0) {
        PyBuffer_Release(&out);
        return NULL;
    }
    if (offset < 0 || offset > out.len || in.len > out.len - offset) {
        PyErr_Format(PyExc_ValueError, "store_words(): %zd bytes at offset %zd do not fit %zd",
                     in.len, offset, out.len);
        PyBuffer_Release(&in);
        PyBuffer_Release(&out);
        return NULL;
    }
    char *to = (char *)out.buf + offset;
    const char *from = (const char *)in.buf;
    if ((((uintptr_t)to | (uintptr_t)from | (uintptr_t)in.len) & 7) == 0) {
        int64_t *words = (int64_t *)to;
        const int64_t *values = (const int64_t *)from;
        for (Py_ssize_t i = 0; i < in.len / 8; i++)
            __atomic_store_n(&words[i], values[i], __ATOMIC_RELAXED);
    }
    else {
        memcpy(to, from, (size_t)in.len);
    }
    if (fence)
        __atomic_thread_fence(__ATOMIC_SEQ_CST);
    PyBuffer_Release(&in);
    PyBuffer_Release(&out);
    Py_RETURN_NONE;
}

/* accumulate_elements(address, type, op, origin, result, compare, gate): MPI's accumulate family
 * on the elements at ``address`` (a window's memory, this process's or a peer's mapped here),
 * under the target's gate: an int64 word every rank maps, taken by a compare-and-swap and released
 * by a store.  MPI promises an accumulate atomic per element against every other accumulate on
 * that element; one lock word per target keeps the promise, as MPICH's own accumulate into shared
 * memory does with its window mutex — here without the RMA call's bookkeeping around it, and the
 * op itself a plain loop (a locked instruction per element would cost ~10 ns each: 1.5 ms for
 * 1 MiB).  The transport takes this path only for a window where every rank agreed to, so that no
 * element ever sees both this and MPI's own accumulate.
 *
 * ``type``: one of the TYPE_* codes below (cpu_atomics.ELEMENT_TYPES names them by numpy dtype);
 * ``op``: aiorma.Op's value (SUM 1 ... NO_OP 12), or 0 for compare-and-swap; ``origin``: the
 * operand (a buffer; None for NO_OP), ``result``: where the old values go (a writable buffer, or
 * None), ``compare``: compare-and-swap's expected values (a buffer, else None); ``gate``: the
 * address of the target's gate word.  The element count is the length of origin, else of result.
 * Arithmetic as MPI libraries do it in C: integers wrap; MIN (MAX) keeps the target's value only
 * when it is strictly smaller (larger) than the operand; the logical ops give 0 or 1.  Operands
 * may be unaligned (moved by memcpy); the target must be aligned to its elements (checked).
 *
 * A gate held by another rank is waited for: spinning briefly, then handing the core on
 * (sched_yield, the interpreter lock let go) — the holder may be a process the scheduler put
 * aside, on a node with more ranks than cores.  A gate held for GATE_TIMEOUT seconds means its
 * holder died inside an accumulate: TimeoutError, rather than a wait that never ends. */
enum { OP_CAS = 0, OP_SUM = 1, OP_PROD, OP_MIN, OP_MAX, OP_BAND, OP_BOR, OP_BXOR, OP_LAND,
       OP_LOR, OP_LXOR, OP_REPLACE, OP_NO_OP };
enum { TYPE_I8 = 1, TYPE_I16, TYPE_I32, TYPE_I64, TYPE_U8, TYPE_U16, TYPE_U32, TYPE_U64,
       TYPE_F32, TYPE_F64 };
static const Py_ssize_t type_sizes[] = {0, 1, 2, 4, 8, 1, 2, 4, 8, 4, 8};
#define GATE_TIMEOUT 30.0

static double
now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int
try_gate(int64_t *gate)
{
    int64_t open = 0;
    return __atomic_load_n(gate, __ATOMIC_RELAXED) == 0
           && __atomic_compare_exchange_n(gate, &open, 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED);
}

/* 0 with the gate held, -1 with TimeoutError set. */
static int
take_gate(int64_t *gate)
{
    for (int spin = 0; spin < 200; spin++) {
        if (try_gate(gate))
            return 0;
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
    }
    int taken = 0;
    Py_BEGIN_ALLOW_THREADS
    double deadline = now() + GATE_TIMEOUT;
    while (!(taken = try_gate(gate)) && now() < deadline)
        sched_yield();
    Py_END_ALLOW_THREADS
    if (!taken) {
        PyErr_Format(PyExc_TimeoutError,
                     "accumulate_elements(): the target's accumulate gate was held for %.0f s (a rank "
                     "died inside an accumulate?)", GATE_TIMEOUT);
        return -1;
    }
    return 0;
}

/* One op over every element of type T, under the gate.  EXPR computes the new value from ``cur``
 * (the target's) and ``opd`` (the operand's).  The old values are copied out first, in bulk; an
 * aligned operand is read in place, so that the loop vectorizes (a 1 MiB accumulate at memory
 * speed, as MPICH's). */
#define APPLY(T, EXPR)                                                                       \
    if (out)                                                                                 \
        memcpy(out, t, (size_t)count * sizeof(T));                                           \
    if ((uintptr_t)in % sizeof(T) == 0) {                                                    \
        const T *o = (const T *)in;                                                          \
        for (Py_ssize_t i = 0; i < count; i++) {                                             \
            T cur = t[i], opd = o[i];                                                        \
            t[i] = (EXPR);                                                                   \
        }                                                                                    \
    }                                                                                        \
    else {                                                                                   \
        for (Py_ssize_t i = 0; i < count; i++) {                                             \
            T cur = t[i], opd;                                                               \
            memcpy(&opd, in + i * (Py_ssize_t)sizeof(T), sizeof(T));                        \
            t[i] = (EXPR);                                                                   \
        }                                                                                    \
    }                                                                                        \
    break;

/* A read (NO_OP): the old values out, the target unchanged. */
#define READ(T)                                                                              \
    case OP_NO_OP:                                                                           \
        memcpy(out, t, (size_t)count * sizeof(T));                                           \
        break;

/* Compare-and-swap (integer types only, as MPI's). */
#define SWAP(T)                                                                              \
    case OP_CAS:                                                                             \
        for (Py_ssize_t i = 0; i < count; i++) {                                             \
            T cur = t[i], opd, expected;                                                     \
            memcpy(&opd, in + i * (Py_ssize_t)sizeof(T), sizeof(T));                        \
            memcpy(&expected, cmp + i * (Py_ssize_t)sizeof(T), sizeof(T));                  \
            if (out)                                                                         \
                memcpy(out + i * (Py_ssize_t)sizeof(T), &cur, sizeof(T));                   \
            if (cur == expected)                                                             \
                t[i] = opd;                                                                  \
        }                                                                                    \
        break;

/* Every op on elements of integer type T, as one function per type (small functions: the loops
 * vectorize); UT is the unsigned type of T's width, for wrapping arithmetic without signed
 * overflow. */
#define INTEGER_OPS(NAME, T, UT)                                                             \
    static void NAME(char *target, const char *in, const char *cmp, char *out, Py_ssize_t count, \
                     long op)                                                                \
    {                                                                                        \
        T *t = (T *)target;                                                                  \
        switch (op) {                                                                        \
        READ(T)                                                                              \
        SWAP(T)                                                                              \
        case OP_SUM: APPLY(T, (T)((UT)cur + (UT)opd))                                        \
        case OP_PROD: APPLY(T, (T)((UT)cur * (UT)opd))                                       \
        case OP_MIN: APPLY(T, cur < opd ? cur : opd)                                         \
        case OP_MAX: APPLY(T, cur > opd ? cur : opd)                                         \
        case OP_BAND: APPLY(T, cur & opd)                                                    \
        case OP_BOR: APPLY(T, cur | opd)                                                     \
        case OP_BXOR: APPLY(T, cur ^ opd)                                                    \
        case OP_LAND: APPLY(T, (T)(cur && opd))                                              \
        case OP_LOR: APPLY(T, (T)(cur || opd))                                               \
        case OP_LXOR: APPLY(T, (T)(!cur != !opd))                                            \
        default: APPLY(T, ((void)cur, opd)) /* OP_REPLACE: element by element, each whole */ \
        }                                                                                    \
    }

#define FLOAT_OPS(NAME, T)                                                                   \
    static void NAME(char *target, const char *in, const char *cmp, char *out, Py_ssize_t count, \
                     long op)                                                                \
    {                                                                                        \
        T *t = (T *)target;                                                                  \
        (void)cmp;                                                                           \
        switch (op) {                                                                        \
        READ(T)                                                                              \
        case OP_SUM: APPLY(T, cur + opd)                                                     \
        case OP_PROD: APPLY(T, cur * opd)                                                    \
        case OP_MIN: APPLY(T, cur < opd ? cur : opd)                                         \
        case OP_MAX: APPLY(T, cur > opd ? cur : opd)                                         \
        default: APPLY(T, ((void)cur, opd)) /* OP_REPLACE */                                 \
        }                                                                                    \
    }

INTEGER_OPS(apply_i8, int8_t, uint8_t)
INTEGER_OPS(apply_i16, int16_t, uint16_t)
INTEGER_OPS(apply_i32, int32_t, uint32_t)
INTEGER_OPS(apply_i64, int64_t, uint64_t)
INTEGER_OPS(apply_u8, uint8_t, uint8_t)
INTEGER_OPS(apply_u16, uint16_t, uint16_t)
INTEGER_OPS(apply_u32, uint32_t, uint32_t)
INTEGER_OPS(apply_u64, uint64_t, uint64_t)
FLOAT_OPS(apply_f32, float)
FLOAT_OPS(apply_f64, double)

typedef void (*apply_function)(char *, const char *, const char *, char *, Py_ssize_t, long);
static const apply_function apply[] = {NULL, apply_i8, apply_i16, apply_i32, apply_i64, apply_u8,
                                       apply_u16, apply_u32, apply_u64, apply_f32, apply_f64};

static int
optional_buffer(PyObject *arg, Py_buffer *view, int flags)
{
    if (arg == Py_None) {
        view->obj = NULL;
        view->buf = NULL;
        view->len = 0;
        return 0;
    }
    return PyObject_GetBuffer(arg, view, flags | PyBUF_C_CONTIGUOUS);
}

static void
release(Py_buffer *view)
{
    if (view->obj != NULL)
        PyBuffer_Release(view);
}

static PyObject *
accumulate_elements(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 7) {
        PyErr_SetString(PyExc_TypeError,
                        "accumulate_elements() takes (address, type, op, origin, result, compare, gate)");
        return NULL;
    }
    void *address = PyLong_AsVoidPtr(args[0]);
    if (address == NULL && PyErr_Occurred())
        return NULL;
    int64_t *gate;
    if (word_arg(args[6], &gate) < 0)
        return NULL;
    long type = PyLong_AsLong(args[1]), op = PyLong_AsLong(args[2]);
    if (PyErr_Occurred())
        return NULL;
    if (type < TYPE_I8 || type > TYPE_F64 || op < OP_CAS || op > OP_NO_OP
        || (type >= TYPE_F32 && ((op >= OP_BAND && op <= OP_LXOR) || op == OP_CAS))) {
        PyErr_Format(PyExc_ValueError, "accumulate_elements(): no op %ld on element type %ld", op, type);
        return NULL;
    }
    Py_ssize_t size = type_sizes[type];
    if (address == NULL || ((uintptr_t)address % (uintptr_t)size) != 0) {
        PyErr_SetString(PyExc_ValueError, "accumulate_elements(): the target must be aligned to its elements");
        return NULL;
    }
    Py_buffer origin, result, compare;
    if (optional_buffer(args[3], &origin, PyBUF_SIMPLE) < 0)
        return NULL;
    if (optional_buffer(args[4], &result, PyBUF_WRITABLE) < 0) {
        release(&origin);
        return NULL;
    }
    if (optional_buffer(args[5], &compare, PyBUF_SIMPLE) < 0) {
        release(&origin);
        release(&result);
        return NULL;
    }
    Py_ssize_t length = origin.obj != NULL ? origin.len : result.len;
    Py_ssize_t count = length / size;
    int failed = 1;
    if (length % size != 0 || (origin.obj == NULL && op != OP_NO_OP)
        || (op == OP_NO_OP && result.obj == NULL) || (result.obj != NULL && result.len != length)
        || (compare.obj == NULL) != (op != OP_CAS) || (compare.obj != NULL && compare.len != length)) {
        PyErr_SetString(PyExc_ValueError, "accumulate_elements(): the buffers do not match the op");
    }
    else if (take_gate(gate) == 0) {
        apply[type]((char *)address, (const char *)origin.buf, (const char *)compare.buf,
                    (char *)result.buf, count, op);
        __atomic_store_n(gate, 0, __ATOMIC_RELEASE);
        failed = 0;
    }
    release(&origin);
    release(&result);
    release(&compare);
    if (failed)
        return NULL;
    Py_RETURN_NONE;
}

/* words_changed(region, seen): whether the int64 words of ``region`` differ from ``seen`` (both
 * C-contiguous, as long, 8-byte aligned, ``seen`` writable); if they do, ``seen`` becomes their
 * copy.  The region is this rank's control words, which peers of this node change only with the
 * CPU's atomics: an acquire fence, then one relaxed load per word, sees every change made before
 * it (what MPI_Win_sync gives a reader in the unified model, without an MPI call per window and
 * poll), and never half of a word. */
static PyObject *
words_changed(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "words_changed() takes (region, seen)");
        return NULL;
    }
    Py_buffer region, seen;
    if (PyObject_GetBuffer(args[0], &region, PyBUF_C_CONTIGUOUS) < 0)
        return NULL;
    if (PyObject_GetBuffer(args[1], &seen, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0) {
        PyBuffer_Release(&region);
        return NULL;
    }
    PyObject *result = NULL;
    if (region.len != seen.len || (((uintptr_t)region.buf | (uintptr_t)seen.buf | (uintptr_t)region.len) & 7) != 0) {
        PyErr_Format(PyExc_ValueError, "words_changed(): two aligned buffers of as many words are required "
                     "(%zd and %zd bytes)", region.len, seen.len);
        goto done;
    }
    {
        const int64_t *words = (const int64_t *)region.buf;
        int64_t *copy = (int64_t *)seen.buf;
        Py_ssize_t n = region.len / 8;
        int changed = 0;
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        for (Py_ssize_t i = 0; i < n; i++) {
            int64_t word = __atomic_load_n(&words[i], __ATOMIC_RELAXED);
            if (word != copy[i]) {
                copy[i] = word;
                changed = 1;
            }
        }
        result = PyBool_FromLong(changed);
    }
done:
    PyBuffer_Release(&seen);
    PyBuffer_Release(&region);
    return result;
}

static PyMethodDef methods[] = {
    {"exchange", (PyCFunction)(void (*)(void))exchange, METH_FASTCALL,
     "exchange(address, value, order=5): store value; the old value."},
    {"fetch_add", (PyCFunction)(void (*)(void))fetch_add, METH_FASTCALL,
     "fetch_add(address, value, order=5): add value (wrapping like int64); the old value."},
    {"compare_exchange", (PyCFunction)(void (*)(void))compare_exchange, METH_FASTCALL,
     "compare_exchange(address, compare, value): store value if the word equals compare; the "
     "old value either way."},
    {"fetch_max", (PyCFunction)(void (*)(void))fetch_max, METH_FASTCALL,
     "fetch_max(address, value): raise the word to value if it is below; the old value."},
    {"store_words", (PyCFunction)(void (*)(void))store_words, METH_FASTCALL,
     "store_words(destination, offset, source, fence=False): the bytes of source into destination "
     "from byte offset on, each aligned 8-byte word by one store; then a full barrier if fence."},
    {"words_changed", (PyCFunction)(void (*)(void))words_changed, METH_FASTCALL,
     "words_changed(region, seen): whether the words of region differ from seen; if so seen "
     "becomes their copy."},
    {"accumulate_elements", (PyCFunction)(void (*)(void))accumulate_elements, METH_FASTCALL,
     "accumulate_elements(address, type, op, origin, result, compare, gate): MPI's accumulate "
     "family on the elements at address, under the target's gate word; old values into result."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    "aiorma.transport.mpi._cpu_atomics",
    "The CPU's atomic instructions on int64 words by address (compiled; see cpu_atomics.py).",
    0,
    methods,
};

PyMODINIT_FUNC
PyInit__cpu_atomics(void)
{
    return PyModule_Create(&module_def);
}
