/* LL words, encoded and decoded in one call each: the compiled form of the codec in
 * aiorma/collectives/ll.py (see there for the layout and why the flag travels in the data).
 *
 * A word, read as a uint64, is ``payload | flag << 32``: its payload half holds 4 bytes of the
 * message in memory order (zero-padded at the end), its other half the message's flag.  The
 * Python codec builds the same words with struct, memoryview or numpy — each of its numpy calls
 * (a new array, a view, a copy) costs about a microsecond, several per 8-byte message on both
 * sides; here a message is one call that writes into buffers the caller owns.
 *
 * The interpreter lock is held throughout: a few words need no letting go.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* Words checked on the stack; a longer slot takes a heap copy (LL messages are short). */
#define STACK_WORDS 64

static int
flag_arg(PyObject *arg, uint32_t *flag)
{
    unsigned long value = PyLong_AsUnsignedLong(arg);
    if (value == (unsigned long)-1 && PyErr_Occurred())
        return -1;
    if (value > 0xFFFFFFFFul) {
        PyErr_SetString(PyExc_ValueError, "an LL flag is a 32-bit unsigned value");
        return -1;
    }
    *flag = (uint32_t)value;
    return 0;
}

/* encode_into(words, data, flag): the bytes of ``data`` (a C-contiguous buffer of n bytes) as
 * the first ceil(n / 4) words of ``words`` (a writable, aligned buffer of 8-byte words). */
static PyObject *
encode_into(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "encode_into() takes (words, data, flag)");
        return NULL;
    }
    uint32_t flag;
    if (flag_arg(args[2], &flag) < 0)
        return NULL;
    Py_buffer out, data;
    if (PyObject_GetBuffer(args[0], &out, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0)
        return NULL;
    if (PyObject_GetBuffer(args[1], &data, PyBUF_C_CONTIGUOUS) < 0) {
        PyBuffer_Release(&out);
        return NULL;
    }
    PyObject *result = NULL;
    Py_ssize_t count = (data.len + 3) / 4;
    if (((uintptr_t)out.buf & 7) != 0 || out.len < 8 * count) {
        PyErr_Format(PyExc_ValueError, "encode_into(): an aligned buffer of %zd words is required (%zd bytes)",
                     count, out.len);
        goto done;
    }
    {
        const unsigned char *bytes = (const unsigned char *)data.buf;
        uint64_t *words = (uint64_t *)out.buf;
        uint64_t high = (uint64_t)flag << 32;
        for (Py_ssize_t i = 0; i < count; i++) {
            uint32_t payload = 0;
            Py_ssize_t left = data.len - 4 * i;
            memcpy(&payload, bytes + 4 * i, left < 4 ? (size_t)left : 4);
            words[i] = high | payload;
        }
        result = Py_NewRef(Py_None);
    }
done:
    PyBuffer_Release(&data);
    PyBuffer_Release(&out);
    return result;
}

/* decode_into(out, memory, word, flag): True and the payload of the LL words of ``memory`` (an
 * aligned buffer of 8-byte words) from index ``word`` on in ``out`` (a writable buffer of the
 * message's n bytes) when each of those ceil(n / 4) words carries ``flag``; else False, ``out``
 * untouched.  Each word is read once, by one 8-byte load, and only the loaded values are
 * examined: flag and payload of a word come from the same write, whenever a peer writes. */
static PyObject *
decode_into(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "decode_into() takes (out, memory, word, flag)");
        return NULL;
    }
    Py_ssize_t first = PyLong_AsSsize_t(args[2]);
    if (first == -1 && PyErr_Occurred())
        return NULL;
    uint32_t flag;
    if (flag_arg(args[3], &flag) < 0)
        return NULL;
    Py_buffer out, memory;
    if (PyObject_GetBuffer(args[0], &out, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0)
        return NULL;
    if (PyObject_GetBuffer(args[1], &memory, PyBUF_C_CONTIGUOUS) < 0) {
        PyBuffer_Release(&out);
        return NULL;
    }
    PyObject *result = NULL;
    uint64_t stack[STACK_WORDS];
    uint64_t *loaded = stack;
    Py_ssize_t count = (out.len + 3) / 4;
    if (((uintptr_t)memory.buf & 7) != 0 || first < 0 || first + count > memory.len / 8) {
        PyErr_Format(PyExc_ValueError, "decode_into(): words %zd to %zd of an aligned buffer of %zd words",
                     first, first + count, memory.len / 8);
        goto done;
    }
    if (count > STACK_WORDS && (loaded = PyMem_Malloc(8 * (size_t)count)) == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    {
        const uint64_t *words = (const uint64_t *)memory.buf + first;
        int landed = 1;
        for (Py_ssize_t i = 0; i < count; i++) {
            loaded[i] = __atomic_load_n(&words[i], __ATOMIC_RELAXED);
            if ((uint32_t)(loaded[i] >> 32) != flag) {
                landed = 0;
                break;
            }
        }
        if (landed) {
            /* Loads of this process's memory seen after the flags: ordered by the acquire fence
             * (the payload came in the same loads, this only keeps the compiler honest). */
            __atomic_thread_fence(__ATOMIC_ACQUIRE);
            unsigned char *bytes = (unsigned char *)out.buf;
            for (Py_ssize_t i = 0; i < count; i++) {
                uint32_t payload = (uint32_t)loaded[i];
                Py_ssize_t left = out.len - 4 * i;
                memcpy(bytes + 4 * i, &payload, left < 4 ? (size_t)left : 4);
            }
        }
        result = PyBool_FromLong(landed);
    }
done:
    if (loaded != stack)
        PyMem_Free(loaded);
    PyBuffer_Release(&memory);
    PyBuffer_Release(&out);
    return result;
}

static PyMethodDef methods[] = {
    {"encode_into", (PyCFunction)(void (*)(void))encode_into, METH_FASTCALL,
     "encode_into(words, data, flag): data's bytes as LL words carrying flag, into words."},
    {"decode_into", (PyCFunction)(void (*)(void))decode_into, METH_FASTCALL,
     "decode_into(out, memory, word, flag): True and the payload in out when every LL word from "
     "memory[word] on carries flag, else False."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    "aiorma.collectives._ll_codec",
    "LL words encoded and decoded in one call (compiled; see ll.py).",
    0,
    methods,
};

PyMODINIT_FUNC
PyInit__ll_codec(void)
{
    return PyModule_Create(&module_def);
}
