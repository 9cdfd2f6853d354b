/* ember._speedups, ASGI part: the common case of an ASGI HTTP request's receive() and
 * send() in C (ember/_asgi_http.py has the whole protocol in Python).
 *
 * Cycle is the base type of the C crossing's _HTTPCycle: its fields are C members that
 * the Python methods read and write as attributes, and its receive() and send() handle
 * the usual messages here: the buffered body as one http.request event, the
 * http.response.start, and a whole http.response.body whose headers are only a
 * Content-Type (perhaps with a matching Content-Length), answered with one
 * ember_request_respond_small. Everything else (streamed bodies, more_body answers,
 * disconnect waits, unusual headers, errors) calls the Python method, unchanged, before
 * touching any state: what the C path accepts, the Python path would have done the same.
 *
 * A message handled here returns a Done: an awaitable that finishes at once with its
 * value, registered as a collections.abc.Coroutine (by ember/_crossing.py) so that
 * asyncio.create_task(send(m)) and asyncio.wait_for(receive(), t) keep working. It saves
 * the coroutine and frame per call that an async def costs.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <stdint.h>
#include <string.h>

int ember_asgi_init(PyObject *m);

typedef int32_t (*respond_small_fn)(uint64_t, uint16_t, const char *, uint32_t, const char *, uint32_t);
static respond_small_fn engine_respond_small;
static PyObject *slow_send, *slow_receive; /* the Python methods (plain functions) */
static Py_ssize_t nocopy_min;
static long rc_ok, rc_invalid;
static PyObject *s_type, *s_start, *s_body_kind, *s_status, *s_headers, *s_body, *s_more_body,
    *s_request_kind, *s_method, *s_head, *s_after, *empty_bytes, *empty_tuple;

/* -- Done: an awaitable already finished ------------------------------------------- */
typedef struct {
    PyObject_HEAD
    PyObject *value; /* NULL: None */
} Done;

static PyTypeObject DoneType;

static PyObject *done_new(PyObject *value)
{
    Done *d = PyObject_New(Done, &DoneType);
    if (d != NULL)
        d->value = value; /* the reference is stolen */
    else
        Py_XDECREF(value);
    return (PyObject *)d;
}

static void done_dealloc(Done *d)
{
    Py_XDECREF(d->value);
    PyObject_Free(d);
}

static PyObject *done_self(PyObject *d)
{
    Py_INCREF(d);
    return d;
}

/* Ends with StopIteration(value): the value of the await. */
static PyObject *done_next(Done *d)
{
    if (d->value != NULL && d->value != Py_None) {
        PyObject *e = PyObject_CallOneArg(PyExc_StopIteration, d->value);
        if (e != NULL) {
            PyErr_SetObject(PyExc_StopIteration, e);
            Py_DECREF(e);
        }
    }
    return NULL; /* no exception set: StopIteration(None) */
}

static PyObject *done_send(Done *d, PyObject *arg)
{
    (void)arg;
    PyObject *r = done_next(d);
    if (r == NULL && !PyErr_Occurred())
        PyErr_SetNone(PyExc_StopIteration);
    return r;
}

static PyObject *done_throw(Done *d, PyObject *const *args, Py_ssize_t n)
{
    (void)d;
    if (n < 1 || n > 3) {
        PyErr_SetString(PyExc_TypeError, "throw(type[, value[, traceback]])");
        return NULL;
    }
    PyObject *typ = args[0], *val = n > 1 ? args[1] : Py_None;
    if (PyExceptionInstance_Check(typ))
        PyErr_SetObject((PyObject *)Py_TYPE(typ), typ);
    else if (PyExceptionClass_Check(typ))
        PyErr_SetObject(typ, val == Py_None ? NULL : val);
    else
        PyErr_SetString(PyExc_TypeError, "exceptions must derive from BaseException");
    return NULL;
}

static PyObject *done_close(PyObject *d, PyObject *unused)
{
    (void)d;
    (void)unused;
    Py_RETURN_NONE;
}

static PyMethodDef done_methods[] = {
    {"send", (PyCFunction)done_send, METH_O, NULL},
    {"throw", (PyCFunction)(void (*)(void))done_throw, METH_FASTCALL, NULL},
    {"close", done_close, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static PyAsyncMethods done_async = {done_self, NULL, NULL, NULL};

static PyTypeObject DoneType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "ember._speedups.Done",
    .tp_basicsize = sizeof(Done),
    .tp_dealloc = (destructor)done_dealloc,
    .tp_as_async = &done_async,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_iter = done_self,
    .tp_iternext = (iternextfunc)done_next,
    .tp_methods = done_methods,
};

/* -- Cycle: one request's state ------------------------------------------------------- */
typedef struct {
    PyObject_HEAD
    unsigned long long handle;
    PyObject *body, *scope, *status, *headers, *parts, *waiter, *events, *collect;
    char done, streaming;
} Cycle;

#define NONE(o) ((o) == NULL || (o) == Py_None)

static int cycle_traverse(Cycle *c, visitproc visit, void *arg)
{
    Py_VISIT(c->body);
    Py_VISIT(c->scope);
    Py_VISIT(c->status);
    Py_VISIT(c->headers);
    Py_VISIT(c->parts);
    Py_VISIT(c->waiter);
    Py_VISIT(c->events);
    Py_VISIT(c->collect);
    return 0;
}

static int cycle_clear(Cycle *c)
{
    Py_CLEAR(c->body);
    Py_CLEAR(c->scope);
    Py_CLEAR(c->status);
    Py_CLEAR(c->headers);
    Py_CLEAR(c->parts);
    Py_CLEAR(c->waiter);
    Py_CLEAR(c->events);
    Py_CLEAR(c->collect);
    return 0;
}

static void cycle_dealloc(Cycle *c)
{
    /* A Python subclass's instance: subtype_dealloc drops the type's reference. */
    PyObject_GC_UnTrack(c);
    cycle_clear(c);
    Py_TYPE(c)->tp_free((PyObject *)c);
}

static int is_name(PyObject *name, const char *want, Py_ssize_t n)
{
    if (!PyBytes_CheckExact(name) || PyBytes_GET_SIZE(name) != n)
        return 0;
    const char *s = PyBytes_AS_STRING(name);
    for (Py_ssize_t i = 0; i < n; i++) {
        char ch = s[i];
        if (ch >= 'A' && ch <= 'Z')
            ch += 'a' - 'A';
        if (ch != want[i])
            return 0;
    }
    return 1;
}

/* A header pair as (name, value), both exact bytes; else 0 (the Python path decides). */
static int pair(PyObject *item, PyObject **name, PyObject **value)
{
    if (PyTuple_CheckExact(item) && PyTuple_GET_SIZE(item) == 2) {
        *name = PyTuple_GET_ITEM(item, 0);
        *value = PyTuple_GET_ITEM(item, 1);
    } else if (PyList_CheckExact(item) && PyList_GET_SIZE(item) == 2) {
        *name = PyList_GET_ITEM(item, 0);
        *value = PyList_GET_ITEM(item, 1);
    } else {
        return 0;
    }
    return PyBytes_CheckExact(*name) && PyBytes_CheckExact(*value);
}

/* Whether the bytes are n written as `%zd` would write it (digits, no sign, no leading
 * zero): read rather than printed, since snprintf cost ~650 instructions per request. */
static int is_decimal(PyObject *b, Py_ssize_t n)
{
    const char *s = PyBytes_AS_STRING(b);
    Py_ssize_t len = PyBytes_GET_SIZE(b);
    /* 19 digits fit an unsigned 64-bit value; any Py_ssize_t has at most 19. */
    if (n < 0 || len < 1 || len > 19 || (len > 1 && s[0] == '0'))
        return 0;
    unsigned long long v = 0;
    for (Py_ssize_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return 0;
        v = v * 10 + (unsigned long long)(s[i] - '0');
    }
    return v == (unsigned long long)n;
}

/* _asgi_http._small_type: the Content-Type of headers that are only that, perhaps with
 * a Content-Length of exactly n (not for HEAD); NULL when the Python path must decide. */
static PyObject *small_type(Cycle *c, Py_ssize_t n)
{
    PyObject *h = c->headers, *name, *value, *name2, *value2;
    Py_ssize_t count;
    if (PyList_CheckExact(h))
        count = PyList_GET_SIZE(h);
    else if (PyTuple_CheckExact(h))
        count = PyTuple_GET_SIZE(h);
    else
        return NULL;
    if (count < 1 || count > 2)
        return NULL;
    PyObject **items = PyList_CheckExact(h) ? ((PyListObject *)h)->ob_item : ((PyTupleObject *)h)->ob_item;
    if (!pair(items[0], &name, &value))
        return NULL;
    if (count == 2) {
        if (!pair(items[1], &name2, &value2))
            return NULL;
        if (!is_name(name2, "content-length", 14)) {
            PyObject *t = name, *v = value;
            name = name2, value = value2, name2 = t, value2 = v;
            if (!is_name(name2, "content-length", 14))
                return NULL;
        }
        if (!is_decimal(value2, n))
            return NULL;
        PyObject *method = PyDict_CheckExact(c->scope) ? PyDict_GetItemWithError(c->scope, s_method) : NULL;
        if (method == NULL || !PyUnicode_CheckExact(method)) {
            PyErr_Clear();
            return NULL;
        }
        if (PyUnicode_Compare(method, s_head) == 0)
            return NULL;
    }
    if (!is_name(name, "content-type", 12) || PyBytes_GET_SIZE(value) > 0xFFFFFFFF)
        return NULL;
    return value;
}

static PyObject *get(PyObject *dict, PyObject *key)
{
    PyObject *v = PyDict_GetItemWithError(dict, key);
    if (v == NULL)
        PyErr_Clear();
    return v;
}

static void set(PyObject **field, PyObject *v)
{
    PyObject *old = *field;
    Py_INCREF(v);
    *field = v;
    Py_XDECREF(old);
}

/* send(message): see the top of the file. */
static PyObject *cycle_send(Cycle *c, PyObject *msg)
{
    PyObject *kind = PyDict_CheckExact(msg) ? get(msg, s_type) : NULL;
    if (kind == NULL || !PyUnicode_CheckExact(kind) || engine_respond_small == NULL)
        goto slow;
    if (kind == s_start || PyUnicode_Compare(kind, s_start) == 0) {
        PyObject *status = get(msg, s_status), *headers = get(msg, s_headers);
        if (!NONE(c->status) || status == NULL || !PyLong_CheckExact(status))
            goto slow;
        set(&c->status, status);
        set(&c->headers, headers != NULL ? headers : empty_tuple);
        return done_new(NULL);
    }
    if (kind == s_body_kind || PyUnicode_Compare(kind, s_body_kind) == 0) {
        if (NONE(c->status) || c->done || c->streaming || !NONE(c->parts))
            goto slow;
        PyObject *more = get(msg, s_more_body), *body = get(msg, s_body);
        if (more != NULL && more != Py_False && more != Py_None)
            goto slow; /* (a more_body that is merely falsy also goes the Python way) */
        if (body == NULL)
            body = empty_bytes;
        if (!PyBytes_CheckExact(body) || PyBytes_GET_SIZE(body) >= nocopy_min)
            goto slow;
        Py_ssize_t n = PyBytes_GET_SIZE(body);
        PyObject *ctype = small_type(c, n);
        if (ctype == NULL)
            goto slow;
        unsigned long long status = PyLong_AsUnsignedLongLongMask(c->status);
        if (status == (unsigned long long)-1 && PyErr_Occurred())
            return NULL;
        int32_t rc = engine_respond_small(c->handle, (uint16_t)status, PyBytes_AS_STRING(ctype),
                                          (uint32_t)PyBytes_GET_SIZE(ctype), PyBytes_AS_STRING(body), (uint32_t)n);
        if (rc == rc_invalid)
            goto slow; /* a value the engine refuses: the long way reports it */
        c->done = 1;
        if (rc != rc_ok || !NONE(c->waiter)) {
            /* Refused (reported there) or someone waits for the end: the Python side. */
            PyObject *code = PyLong_FromLong(rc);
            PyObject *r = code ? PyObject_CallMethodOneArg((PyObject *)c, s_after, code) : NULL;
            Py_XDECREF(code);
            if (r == NULL)
                return NULL;
            Py_DECREF(r);
        }
        return done_new(NULL);
    }
slow:
    PyErr_Clear();
    return PyObject_CallFunctionObjArgs(slow_send, (PyObject *)c, msg, NULL);
}

/* receive(): a buffered body is the one http.request event. */
static PyObject *cycle_receive(Cycle *c, PyObject *unused)
{
    (void)unused;
    if (c->body != NULL && PyBytes_CheckExact(c->body)) {
        PyObject *event = PyDict_New();
        if (event == NULL || PyDict_SetItem(event, s_type, s_request_kind) < 0 ||
            PyDict_SetItem(event, s_body, c->body) < 0 || PyDict_SetItem(event, s_more_body, Py_False) < 0) {
            Py_XDECREF(event);
            return NULL;
        }
        set(&c->body, Py_None);
        return done_new(event);
    }
    return PyObject_CallOneArg(slow_receive, (PyObject *)c);
}

static PyMethodDef cycle_methods[] = {
    {"send", (PyCFunction)cycle_send, METH_O, "send(message): the ASGI send (common case in C)"},
    {"receive", (PyCFunction)cycle_receive, METH_NOARGS, "receive(): the ASGI receive (common case in C)"},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef cycle_members[] = {
    {"handle", T_ULONGLONG, offsetof(Cycle, handle), 0, NULL},
    {"body", T_OBJECT, offsetof(Cycle, body), 0, NULL},
    {"scope", T_OBJECT, offsetof(Cycle, scope), 0, NULL},
    {"status", T_OBJECT, offsetof(Cycle, status), 0, NULL},
    {"headers", T_OBJECT, offsetof(Cycle, headers), 0, NULL},
    {"parts", T_OBJECT, offsetof(Cycle, parts), 0, NULL},
    {"waiter", T_OBJECT, offsetof(Cycle, waiter), 0, NULL},
    {"events", T_OBJECT, offsetof(Cycle, events), 0, NULL},
    {"collect", T_OBJECT, offsetof(Cycle, collect), 0, NULL},
    {"done", T_BOOL, offsetof(Cycle, done), 0, NULL},
    {"streaming", T_BOOL, offsetof(Cycle, streaming), 0, NULL},
    {NULL, 0, 0, 0, NULL},
};

static PyTypeObject CycleType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "ember._speedups.Cycle",
    .tp_basicsize = sizeof(Cycle),
    .tp_dealloc = (destructor)cycle_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_traverse = (traverseproc)cycle_traverse,
    .tp_clear = (inquiry)cycle_clear,
    .tp_methods = cycle_methods,
    .tp_members = cycle_members,
    .tp_new = PyType_GenericNew,
};

/* asgi_bind(respond_small_addr, slow_send, slow_receive, nocopy_min, ok, invalid_arg) */
static PyObject *sp_asgi_bind(PyObject *self, PyObject *const *args, Py_ssize_t n)
{
    (void)self;
    if (n != 6 || !PyCallable_Check(args[1]) || !PyCallable_Check(args[2])) {
        PyErr_SetString(PyExc_TypeError, "asgi_bind(respond_small, send, receive, nocopy_min, ok, invalid_arg)");
        return NULL;
    }
    void *p = PyLong_AsVoidPtr(args[0]);
    if (p == NULL) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "ember._speedups: NULL engine function");
        return NULL;
    }
    nocopy_min = PyLong_AsSsize_t(args[3]);
    rc_ok = PyLong_AsLong(args[4]);
    rc_invalid = PyLong_AsLong(args[5]);
    if (PyErr_Occurred())
        return NULL;
    Py_INCREF(args[1]);
    Py_INCREF(args[2]);
    Py_XSETREF(slow_send, args[1]);
    Py_XSETREF(slow_receive, args[2]);
    engine_respond_small = (respond_small_fn)p;
    Py_RETURN_NONE;
}

static PyMethodDef asgi_functions[] = {
    {"asgi_bind", (PyCFunction)(void (*)(void))sp_asgi_bind, METH_FASTCALL,
     "asgi_bind(respond_small_addr, send, receive, nocopy_min, ok, invalid_arg)"},
    {NULL, NULL, 0, NULL},
};

int ember_asgi_init(PyObject *m)
{
    struct { PyObject **at; const char *text; } names[] = {
        {&s_type, "type"}, {&s_start, "http.response.start"}, {&s_body_kind, "http.response.body"},
        {&s_status, "status"}, {&s_headers, "headers"}, {&s_body, "body"}, {&s_more_body, "more_body"},
        {&s_request_kind, "http.request"}, {&s_method, "method"}, {&s_head, "HEAD"}, {&s_after, "_after_small"},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if ((*names[i].at = PyUnicode_InternFromString(names[i].text)) == NULL)
            return -1;
    empty_bytes = PyBytes_FromStringAndSize("", 0);
    empty_tuple = PyTuple_New(0);
    if (empty_bytes == NULL || empty_tuple == NULL || PyType_Ready(&DoneType) < 0 || PyType_Ready(&CycleType) < 0)
        return -1;
    Py_INCREF(&DoneType);
    if (PyModule_AddObject(m, "Done", (PyObject *)&DoneType) < 0)
        return -1;
    Py_INCREF(&CycleType);
    if (PyModule_AddObject(m, "Cycle", (PyObject *)&CycleType) < 0)
        return -1;
    return PyModule_AddFunctions(m, asgi_functions);
}
