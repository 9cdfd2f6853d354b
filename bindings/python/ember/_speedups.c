/* ember._speedups: the per-request crossing between the engine and Python, in C.
 *
 * Through ctypes, every crossing costs thousands of instructions: the CFUNCTYPE
 * trampoline builds its argument objects through the ctypes type machinery, and each
 * answer call converts its arguments through from_param. Here the engine calls a plain C
 * function (on_request) that takes the GIL and calls the binding's dispatch function
 * with three ints by vectorcall, and the answer calls are METH_FASTCALL functions that
 * call the engine directly.
 *
 * The extension never links against libember: bind() receives the addresses of the
 * engine functions from the ctypes library object, so it works with whichever library
 * the binding loaded (the packed one or EMBER_LIBRARY). Like the ctypes path, nothing
 * here trusts its arguments: a wrong type raises TypeError, a stale handle is the
 * engine's error code, and an unbound module raises instead of calling NULL.
 *
 * Optional: if it fails to build or import, the binding uses ctypes (EMBER_PY_SPEEDUPS=0
 * forces that).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

typedef int32_t (*respond_fn)(uint64_t, uint16_t, const char *, size_t, const void *, size_t);
typedef int32_t (*respond_answer_fn)(uint64_t, uint64_t);

static PyObject *str_value; /* "value", interned once: GetAttrString builds it per call */
static respond_fn engine_respond;
static respond_answer_fn engine_respond_answer;

/* The dispatch function of each server, by key. A route's user_data is
 * (key << 32) | slot, so one C callback serves every server; keys are handed out once
 * and a freed server's entry is cleared (after ember_server_free no callback runs). */
#define MAX_SERVERS 4096
typedef struct {
    PyObject *dispatch; /* on_request(slot, handle, info): every route but a plain sync one */
    PyObject *table;    /* the server's route table: (handler, mode) per slot */
    PyObject *request;  /* ember.Request */
    PyObject *response; /* ember.Response */
    PyObject *finish;   /* finish(handle, info, request|None, stream, result) */
    PyObject *failed;   /* failed(handle, info, request|None, exception) */
} server;
static server servers[MAX_SERVERS];
static size_t next_key = 1;
static PyObject *str_stream, *str_prep, *str_detach;
static int as_u64(PyObject *o, uint64_t *out);
int ember_asgi_init(PyObject *m); /* _speedups_asgi.c */
int ember_scope_init(PyObject *m); /* _speedups_scope.c */
#define MODE_SYNC 0
#define MODE_RAW 3 /* an adapter's own callback (ASGI, WSGI): fn(slot, handle, info) */

static void call_py(PyObject *fn, PyObject **args, size_t n)
{
    PyObject *r = PyObject_Vectorcall(fn, args, n, NULL);
    if (r == NULL)
        PyErr_WriteUnraisable(fn); /* these catch everything; this is a bug */
    else
        Py_DECREF(r);
}

/* The handler raised (the error is set): failed() logs it with its traceback and answers 500. */
static void handler_raised(server *sv, PyObject *h, PyObject *i, PyObject *req)
{
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyErr_NormalizeException(&type, &value, &tb);
    if (value == NULL) { /* cannot happen after normalizing; keep the 500 anyway */
        value = Py_None;
        Py_INCREF(value);
    }
    if (tb != NULL)
        PyException_SetTraceback(value, tb);
    PyObject *args[4] = {h, i, req ? req : Py_None, value};
    call_py(sv->failed, args, 4);
    Py_XDECREF(type);
    Py_DECREF(value);
    Py_XDECREF(tb);
}

/* A sync route: the Request made and the handler called here. A prepared Response (the
 * constant answer of a route) for a request the handler did not keep is answered here
 * with ember_request_respond_answer; any other result goes to finish(). */
static void run_sync(server *sv, PyObject *fn, uint64_t handle, size_t info)
{
    PyObject *h = PyLong_FromUnsignedLongLong(handle);
    PyObject *i = PyLong_FromSize_t(info);
    PyObject *req = NULL, *res = NULL, *stream = NULL, *prep = NULL, *v = NULL;
    if (h == NULL || i == NULL) {
        PyErr_WriteUnraisable(NULL);
        goto out;
    }
    PyObject *args[5] = {h, i, NULL, NULL, NULL};
    req = PyObject_Vectorcall(sv->request, args, 2, NULL);
    if (req == NULL) {
        handler_raised(sv, h, i, NULL);
        goto out;
    }
    res = PyObject_Vectorcall(fn, &req, 1, NULL);
    if (res == NULL) {
        handler_raised(sv, h, i, req);
        goto out;
    }
    stream = PyObject_GetAttr(req, str_stream);
    if (stream == NULL) {
        handler_raised(sv, h, i, req);
        goto out;
    }
    if (Py_REFCNT(req) == 1) {
        /* Not kept: its views end with the answer. */
        Py_CLEAR(req);
        if (stream == Py_None && Py_TYPE(res) == (PyTypeObject *)sv->response) {
            prep = PyObject_GetAttr(res, str_prep);
            if (prep == NULL) {
                handler_raised(sv, h, i, NULL);
                goto out;
            }
            if (prep != Py_None && !PyLong_Check(prep) && engine_respond_answer != NULL) {
                uint64_t answer;
                v = PyObject_GetAttr(prep, str_value);
                if (v == NULL || as_u64(v, &answer) < 0) {
                    handler_raised(sv, h, i, NULL);
                    goto out;
                }
                if (engine_respond_answer(handle, answer) == 0)
                    goto out;
                /* Refused: finish() answers again the slow way and reports why. */
            }
        }
    }
    if (req != NULL) {
        /* Kept by the handler: copied out of engine memory before the answer. */
        PyObject *r = PyObject_CallMethodNoArgs(req, str_detach);
        if (r == NULL) {
            handler_raised(sv, h, i, req);
            goto out;
        }
        Py_DECREF(r);
    }
    args[2] = req ? req : Py_None;
    args[3] = stream;
    args[4] = res;
    call_py(sv->finish, args, 5);
out:
    Py_XDECREF(h);
    Py_XDECREF(i);
    Py_XDECREF(req);
    Py_XDECREF(res);
    Py_XDECREF(stream);
    Py_XDECREF(prep);
    Py_XDECREF(v);
}

static int as_u64(PyObject *o, uint64_t *out)
{
    if (!PyLong_Check(o)) {
        PyErr_Format(PyExc_TypeError, "ember: expected an int, got %.100s", Py_TYPE(o)->tp_name);
        return -1;
    }
    unsigned long long v = PyLong_AsUnsignedLongLongMask(o); /* cut like ctypes' c_uint64 */
    if (v == (unsigned long long)-1 && PyErr_Occurred())
        return -1;
    *out = v;
    return 0;
}

/* ember_handler_fn. Runs on an engine thread, without the GIL. */
static void on_request(void *user_data, uint64_t req, const void *info)
{
    size_t ud = (size_t)user_data;
    size_t key = ud >> 32, slot = ud & 0xFFFFFFFFu;
    PyGILState_STATE st = PyGILState_Ensure();
    server *sv = key < MAX_SERVERS ? &servers[key] : NULL;
    if (sv == NULL || sv->dispatch == NULL) {
        /* Cannot happen while the server lives: the engine's handler timeout answers. */
        PyGILState_Release(st);
        return;
    }
    PyObject *entry = slot < (size_t)PyList_GET_SIZE(sv->table) ? PyList_GET_ITEM(sv->table, slot) : NULL;
    long mode = -1;
    if (entry != NULL && PyTuple_CheckExact(entry) && PyTuple_GET_SIZE(entry) == 2 &&
        PyLong_CheckExact(PyTuple_GET_ITEM(entry, 1)))
        mode = PyLong_AsLong(PyTuple_GET_ITEM(entry, 1));
    if (mode == MODE_SYNC || mode == MODE_RAW) {
        PyObject *fn = PyTuple_GET_ITEM(entry, 0);
        Py_INCREF(fn); /* the table may change while it runs */
        if (mode == MODE_SYNC) {
            run_sync(sv, fn, req, (size_t)info);
        } else {
            /* Called as the engine would through ctypes, minus the trampoline; it never raises. */
            PyObject *args[3] = {PyLong_FromSize_t(slot), PyLong_FromUnsignedLongLong(req),
                                 PyLong_FromSize_t((size_t)info)};
            if (args[0] && args[1] && args[2])
                call_py(fn, args, 3);
            else
                PyErr_WriteUnraisable(NULL);
            Py_XDECREF(args[0]);
            Py_XDECREF(args[1]);
            Py_XDECREF(args[2]);
        }
        Py_DECREF(fn);
    } else {
        PyObject *args[3];
        args[0] = PyLong_FromSize_t(slot);
        args[1] = PyLong_FromUnsignedLongLong(req);
        args[2] = PyLong_FromSize_t((size_t)info);
        if (args[0] && args[1] && args[2]) {
            PyObject *fn = sv->dispatch;
            Py_INCREF(fn);
            call_py(fn, args, 3);
            Py_DECREF(fn);
        } else {
            PyErr_WriteUnraisable(NULL);
        }
        Py_XDECREF(args[0]);
        Py_XDECREF(args[1]);
        Py_XDECREF(args[2]);
    }
    PyGILState_Release(st);
}

static int unbound(void)
{
    PyErr_SetString(PyExc_RuntimeError, "ember._speedups: bind() was not called");
    return -1;
}

/* respond(handle, status, head: bytes, body: bytes) -> ember_result */
static PyObject *sp_respond(PyObject *self, PyObject *const *args, Py_ssize_t n)
{
    (void)self;
    uint64_t handle, status;
    if (n != 4) {
        PyErr_SetString(PyExc_TypeError, "respond(handle, status, head, body)");
        return NULL;
    }
    if (engine_respond == NULL && unbound())
        return NULL;
    if (as_u64(args[0], &handle) || as_u64(args[1], &status))
        return NULL;
    PyObject *head = args[2], *body = args[3];
    if (!PyBytes_Check(head) || !PyBytes_Check(body)) {
        PyErr_SetString(PyExc_TypeError, "ember: head and body must be bytes");
        return NULL;
    }
    /* The GIL stays held: the call only claims the request and queues a copy. */
    int32_t rc = engine_respond(handle, (uint16_t)status, PyBytes_AS_STRING(head),
                                (size_t)PyBytes_GET_SIZE(head), PyBytes_AS_STRING(body),
                                (size_t)PyBytes_GET_SIZE(body));
    return PyLong_FromLong(rc);
}

/* respond_answer(handle, answer) -> ember_result; answer is an int or a ctypes c_uint64. */
static PyObject *sp_respond_answer(PyObject *self, PyObject *const *args, Py_ssize_t n)
{
    (void)self;
    uint64_t handle, answer;
    if (n != 2) {
        PyErr_SetString(PyExc_TypeError, "respond_answer(handle, answer)");
        return NULL;
    }
    if (engine_respond_answer == NULL && unbound())
        return NULL;
    if (as_u64(args[0], &handle))
        return NULL;
    if (PyLong_Check(args[1])) {
        if (as_u64(args[1], &answer))
            return NULL;
    } else {
        PyObject *v = PyObject_GetAttr(args[1], str_value); /* an Answer (c_uint64) */
        if (v == NULL)
            return NULL;
        int bad = as_u64(v, &answer);
        Py_DECREF(v);
        if (bad)
            return NULL;
    }
    return PyLong_FromLong(engine_respond_answer(handle, answer));
}

static void *address(PyObject *o)
{
    void *p = PyLong_AsVoidPtr(o);
    if (p == NULL && !PyErr_Occurred())
        PyErr_SetString(PyExc_ValueError, "ember._speedups: NULL engine function");
    return p;
}

/* bind(respond_addr, respond_answer_addr): the engine functions, from ctypes. */
static PyObject *sp_bind(PyObject *self, PyObject *const *args, Py_ssize_t n)
{
    (void)self;
    if (n != 2) {
        PyErr_SetString(PyExc_TypeError, "bind(respond, respond_answer)");
        return NULL;
    }
    void *r = address(args[0]);
    if (r == NULL)
        return NULL;
    void *ra = address(args[1]);
    if (ra == NULL)
        return NULL;
    engine_respond = (respond_fn)r;
    engine_respond_answer = (respond_answer_fn)ra;
    Py_RETURN_NONE;
}

/* register(dispatch, table, Request, Response, finish, failed) -> key: routes of that
 * server pass (key << 32) | slot as user_data. */
static PyObject *sp_register(PyObject *self, PyObject *const *args, Py_ssize_t n)
{
    (void)self;
    if (n != 6 || !PyList_CheckExact(args[1]) || !PyType_Check(args[2]) || !PyType_Check(args[3]) ||
        !PyCallable_Check(args[0]) || !PyCallable_Check(args[4]) || !PyCallable_Check(args[5])) {
        PyErr_SetString(PyExc_TypeError, "register(dispatch, table: list, Request, Response, finish, failed)");
        return NULL;
    }
    if (next_key >= MAX_SERVERS) {
        PyErr_SetString(PyExc_RuntimeError, "ember._speedups: too many servers in this process");
        return NULL;
    }
    size_t key = next_key++;
    PyObject **slots[6] = {&servers[key].dispatch, &servers[key].table, &servers[key].request,
                           &servers[key].response, &servers[key].finish, &servers[key].failed};
    for (int k = 0; k < 6; k++) {
        Py_INCREF(args[k]);
        *slots[k] = args[k];
    }
    return PyLong_FromSize_t(key);
}

/* unregister(key): after ember_server_free returned (no callback runs any more). */
static PyObject *sp_unregister(PyObject *self, PyObject *o)
{
    (void)self;
    size_t key = PyLong_AsSize_t(o);
    if (key == (size_t)-1 && PyErr_Occurred())
        return NULL;
    if (key > 0 && key < MAX_SERVERS && servers[key].dispatch != NULL) {
        server old = servers[key];
        memset(&servers[key], 0, sizeof(server));
        Py_DECREF(old.dispatch);
        Py_DECREF(old.table);
        Py_DECREF(old.request);
        Py_DECREF(old.response);
        Py_DECREF(old.finish);
        Py_DECREF(old.failed);
    }
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"respond", (PyCFunction)(void (*)(void))sp_respond, METH_FASTCALL,
     "respond(handle, status, head, body) -> ember_result (ember_request_respond)"},
    {"respond_answer", (PyCFunction)(void (*)(void))sp_respond_answer, METH_FASTCALL,
     "respond_answer(handle, answer) -> ember_result (ember_request_respond_answer)"},
    {"bind", (PyCFunction)(void (*)(void))sp_bind, METH_FASTCALL,
     "bind(respond_addr, respond_answer_addr): the engine functions to call"},
    {"register", (PyCFunction)(void (*)(void))sp_register, METH_FASTCALL,
     "register(dispatch, table, Request, Response, finish, failed) -> key for route user_data"},
    {"unregister", sp_unregister, METH_O, "unregister(key) once the server is freed"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "ember._speedups",
    "The engine<->Python request crossing in C (optional; see ember/_crossing.py).", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__speedups(void)
{
    if (sizeof(void *) < 8) {
        /* user_data carries a 32-bit key and a 32-bit slot. */
        PyErr_SetString(PyExc_ImportError, "ember._speedups needs a 64-bit process");
        return NULL;
    }
    str_value = PyUnicode_InternFromString("value");
    str_stream = PyUnicode_InternFromString("_stream");
    str_prep = PyUnicode_InternFromString("_prep");
    str_detach = PyUnicode_InternFromString("_detach");
    if (str_value == NULL || str_stream == NULL || str_prep == NULL || str_detach == NULL)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    if (PyModule_AddObject(m, "handler", PyLong_FromVoidPtr((void *)&on_request)) < 0 || ember_asgi_init(m) < 0 ||
        ember_scope_init(m) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
