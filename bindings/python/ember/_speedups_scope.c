/* ember._speedups, ASGI part 2: the start of an ASGI HTTP request in C.
 *
 * AsgiStart is the ASGI server's request callback on the C crossing (ember/asgi.py,
 * _make_callback): called as fn(user_data, handle, info) like the Python one it stands
 * for, it reads the engine's ember_request_info, builds the scope (a copy of the
 * server's template with what differs per request), makes the request's Cycle, calls the
 * app and hands its coroutine to the loop's drive(), all without a Python frame of its
 * own. The info struct's field offsets come from ember/_lib.py's RequestInfo (the one
 * mirror of the C struct) when the callback is made; an engine whose struct is smaller
 * than the fields read here gets the Python callback (fallback) instead.
 *
 * Like the Python callback it never raises: a failure is handed to failed(handle, exc),
 * which logs it and answers 500.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stddef.h>
#include <string.h>

int ember_scope_init(PyObject *m);

/* Fields read, in the order of the offsets tuple. */
enum { F_SIZE, F_METHOD, F_METHOD_LEN, F_PATH, F_PATH_LEN, F_QUERY, F_QUERY_LEN, F_BODY, F_BODY_LEN,
       F_HEADERS, F_HEADER_COUNT, F_VERSION, F_LENGTH, F_FLAGS, F_PEER, F_PEER_LEN, F_END, F_COUNT };

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *app, *template, *root, *state, *drive, *block, *cycle_type, *peers, *clients, *unquote,
        *awaiting, *failed, *fallback;
    Py_ssize_t at[F_COUNT];
} Start;

static PyObject *k_method, *k_path, *k_raw_path, *k_query, *k_client, *k_headers, *k_state, *k_version,
    *k_receive, *k_send, *v_10, *v_2, *v_11, *empty, *no_args;
static const char *method_text[] = {"GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS"};
static PyObject *method_str[7];

#define FIELD(info, s, i, type) (*(const type *)((const char *)(info) + (s)->at[i]))

/* A NULL pointer with a length is read as empty: the header promises pointers for every
 * non-empty field, but a crash of the host is the wrong answer to an engine bug. */
static PyObject *text(const char *p, size_t n)
{
    return n && p != NULL ? PyBytes_FromStringAndSize(p, (Py_ssize_t)n) : (Py_INCREF(empty), empty);
}

static PyObject *method_of(const char *p, size_t n)
{
    for (int i = 0; i < 7; i++)
        if (strlen(method_text[i]) == n && memcmp(method_text[i], p, n) == 0) {
            Py_INCREF(method_str[i]);
            return method_str[i];
        }
    return PyUnicode_DecodeLatin1(p, (Py_ssize_t)n, NULL);
}

/* scope["path"]: the raw path decoded (percent escapes as UTF-8), after the root path. */
static PyObject *path_of(Start *s, PyObject *raw)
{
    PyObject *path = PyUnicode_DecodeLatin1(PyBytes_AS_STRING(raw), PyBytes_GET_SIZE(raw), NULL);
    if (path != NULL && memchr(PyBytes_AS_STRING(raw), '%', (size_t)PyBytes_GET_SIZE(raw)) != NULL)
        Py_SETREF(path, PyObject_CallOneArg(s->unquote, path));
    if (path != NULL && PyUnicode_GET_LENGTH(s->root) > 0)
        Py_SETREF(path, PyUnicode_Concat(s->root, path));
    return path;
}

static int put(PyObject *d, PyObject *k, PyObject *v)
{
    if (v == NULL)
        return -1;
    int r = PyDict_SetItem(d, k, v);
    Py_DECREF(v);
    return r;
}

static PyObject *scope_of(Start *s, const void *info, PyObject **body)
{
    PyObject *tpl = PyList_GET_ITEM(s->template, 0), *scope = PyDict_Copy(tpl), *raw = NULL, *peer = NULL;
    if (scope == NULL)
        return NULL;
    size_t hc = FIELD(info, s, F_HEADER_COUNT, size_t);
    if (put(scope, k_method, method_of(FIELD(info, s, F_METHOD, const char *), FIELD(info, s, F_METHOD_LEN, size_t))) ||
        (raw = text(FIELD(info, s, F_PATH, const char *), FIELD(info, s, F_PATH_LEN, size_t))) == NULL ||
        put(scope, k_path, path_of(s, raw)) || PyDict_SetItem(scope, k_raw_path, raw) ||
        put(scope, k_query, text(FIELD(info, s, F_QUERY, const char *), FIELD(info, s, F_QUERY_LEN, size_t))) ||
        (peer = text(FIELD(info, s, F_PEER, const char *), FIELD(info, s, F_PEER_LEN, size_t))) == NULL)
        goto fail;
    PyObject *client = PyDict_GetItemWithError(s->peers, peer); /* the AddrCache's map */
    if (client != NULL && client != Py_None)
        Py_INCREF(client);
    else if (PyErr_Occurred() || (client = PyObject_CallOneArg(s->clients, peer)) == NULL)
        goto fail;
    if (put(scope, k_client, client))
        goto fail;
    const char *h = FIELD(info, s, F_HEADERS, const char *);
    if (h == NULL)
        hc = 0;
    PyObject *headers = PyList_New((Py_ssize_t)hc);
    if (headers == NULL)
        goto fail;
    for (size_t i = 0; i < hc; i++, h += 4 * sizeof(size_t)) {
        const size_t *w = (const size_t *)h; /* ember_header: name ptr, len, value ptr, len */
        PyObject *pair = PyTuple_New(2);
        if (pair == NULL) {
            Py_DECREF(headers);
            goto fail;
        }
        PyList_SET_ITEM(headers, (Py_ssize_t)i, pair);
        PyObject *n = text((const char *)w[0], w[1]), *v = n ? text((const char *)w[2], w[3]) : NULL;
        if (v == NULL) {
            Py_XDECREF(n);
            Py_DECREF(headers);
            goto fail;
        }
        PyTuple_SET_ITEM(pair, 0, n);
        PyTuple_SET_ITEM(pair, 1, v);
    }
    if (put(scope, k_headers, headers) || put(scope, k_state, PyDict_Copy(s->state)))
        goto fail;
    uint32_t version = FIELD(info, s, F_VERSION, uint32_t);
    if (version != 11 && PyDict_SetItem(scope, k_version, version == 10 ? v_10 : version == 20 ? v_2 : v_11))
        goto fail;
    if (FIELD(info, s, F_FLAGS, uint32_t) & 1) /* streamed: read in receive(), this much declared */
        *body = PyLong_FromLongLong(FIELD(info, s, F_LENGTH, int64_t));
    else
        *body = text(FIELD(info, s, F_BODY, const char *), FIELD(info, s, F_BODY_LEN, size_t));
    if (*body == NULL)
        goto fail;
    Py_DECREF(raw);
    Py_DECREF(peer);
    return scope;
fail:
    Py_XDECREF(raw);
    Py_XDECREF(peer);
    Py_DECREF(scope);
    return NULL;
}

/* The Cycle's C members (_speedups_asgi.c) are set through the attribute protocol:
 * member descriptors, no dict. */
static PyObject *k_handle, *k_body, *k_scope;

static int start(Start *s, PyObject *handle, const void *info)
{
    PyObject *body = NULL, *scope = scope_of(s, info, &body), *cycle = NULL, *args[3], *coro = NULL;
    int rc = -1;
    if (scope == NULL)
        return -1;
    PyTypeObject *tp = (PyTypeObject *)s->cycle_type;
    cycle = tp->tp_new(tp, no_args, NULL);
    if (cycle == NULL || PyObject_SetAttr(cycle, k_handle, handle) || PyObject_SetAttr(cycle, k_body, body) ||
        PyObject_SetAttr(cycle, k_scope, scope))
        goto out;
    args[0] = scope;
    args[1] = PyObject_GetAttr(cycle, k_receive);
    args[2] = args[1] ? PyObject_GetAttr(cycle, k_send) : NULL;
    if (args[2] != NULL)
        coro = PyObject_Vectorcall(s->app, args, 3, NULL);
    Py_XDECREF(args[1]);
    Py_XDECREF(args[2]);
    if (coro == NULL)
        goto out;
    if (!PyCoro_CheckExact(coro)) /* another awaitable: stepped through a coroutine */
        Py_SETREF(coro, PyObject_CallOneArg(s->awaiting, coro));
    if (coro == NULL)
        goto out;
    PyObject *dargs[3] = {coro, cycle, s->block};
    PyObject *r = PyObject_Vectorcall(s->drive, dargs, 3, NULL);
    if (r != NULL) {
        Py_DECREF(r);
        rc = 0;
    }
out:
    Py_XDECREF(coro);
    Py_XDECREF(cycle);
    Py_XDECREF(body);
    Py_DECREF(scope);
    return rc;
}

static PyObject *start_call(Start *s, PyObject *const *args, size_t nargsf, PyObject *kw)
{
    Py_ssize_t n = PyVectorcall_NARGS(nargsf);
    if (n != 3 || kw != NULL) {
        PyErr_SetString(PyExc_TypeError, "AsgiStart(user_data, handle, info)");
        return NULL;
    }
    const void *info = PyLong_AsVoidPtr(args[2]);
    if (info == NULL) {
        PyErr_Clear();
        Py_RETURN_NONE; /* cannot happen: the engine always passes its struct */
    }
    if (FIELD(info, s, F_SIZE, size_t) < (size_t)s->at[F_END])
        return PyObject_Vectorcall(s->fallback, args, 3, NULL); /* an older, smaller struct */
    if (start(s, args[1], info) < 0) {
        /* failed(handle, exception): logged with its traceback, answered 500. */
        PyObject *type, *value, *tb;
        PyErr_Fetch(&type, &value, &tb);
        PyErr_NormalizeException(&type, &value, &tb);
        if (value == NULL) {
            value = Py_None;
            Py_INCREF(value);
        }
        if (tb != NULL && value != Py_None)
            PyException_SetTraceback(value, tb);
        PyObject *fargs[2] = {args[1], value};
        PyObject *r = PyObject_Vectorcall(s->failed, fargs, 2, NULL);
        if (r == NULL)
            PyErr_WriteUnraisable(s->failed);
        Py_XDECREF(r);
        Py_XDECREF(type);
        Py_DECREF(value);
        Py_XDECREF(tb);
    }
    Py_RETURN_NONE;
}

#define START_FIELDS(X) X(app) X(template) X(root) X(state) X(drive) X(block) X(cycle_type) X(peers) \
    X(clients) X(unquote) X(awaiting) X(failed) X(fallback)

static int start_traverse(Start *s, visitproc visit, void *arg)
{
#define VISIT(f) Py_VISIT(s->f);
    START_FIELDS(VISIT)
    return 0;
}

static int start_clear(Start *s)
{
#define CLEAR(f) Py_CLEAR(s->f);
    START_FIELDS(CLEAR)
    return 0;
}

static void start_dealloc(Start *s)
{
    PyObject_GC_UnTrack(s);
    start_clear(s);
    PyObject_GC_Del(s);
}

static PyTypeObject StartType;

/* AsgiStart(app, template: [dict], root: str, state: dict, drive, block, cycle_type,
 *           peers: dict, clients, unquote, awaiting, failed, fallback, offsets: tuple) */
static PyObject *start_new(PyTypeObject *tp, PyObject *args, PyObject *kw)
{
    PyObject *o[13], *offsets;
    if (kw != NULL && PyDict_GET_SIZE(kw)) {
        PyErr_SetString(PyExc_TypeError, "AsgiStart takes no keyword arguments");
        return NULL;
    }
    if (!PyArg_ParseTuple(args, "OO!UO!OOO!O!OOOOOO!:AsgiStart", &o[0], &PyList_Type, &o[1], &o[2], &PyDict_Type,
                          &o[3], &o[4], &o[5], &PyType_Type, &o[6], &PyDict_Type, &o[7], &o[8], &o[9], &o[10],
                          &o[11], &o[12], &PyTuple_Type, &offsets))
        return NULL;
    if (PyList_GET_SIZE(o[1]) != 1 || !PyDict_CheckExact(PyList_GET_ITEM(o[1], 0)) ||
        PyTuple_GET_SIZE(offsets) != F_COUNT || ((PyTypeObject *)o[6])->tp_new == NULL) {
        PyErr_SetString(PyExc_ValueError, "AsgiStart: a one-dict template list, 17 offsets, a cycle type");
        return NULL;
    }
    Start *s = PyObject_GC_New(Start, tp);
    if (s == NULL)
        return NULL;
    s->vectorcall = (vectorcallfunc)start_call;
    PyObject **f[13] = {&s->app, &s->template, &s->root, &s->state, &s->drive, &s->block, &s->cycle_type,
                        &s->peers, &s->clients, &s->unquote, &s->awaiting, &s->failed, &s->fallback};
    for (int i = 0; i < 13; i++) {
        Py_INCREF(o[i]);
        *f[i] = o[i];
    }
    for (int i = 0; i < F_COUNT; i++)
        s->at[i] = PyLong_AsSsize_t(PyTuple_GET_ITEM(offsets, i));
    PyObject_GC_Track(s);
    if (PyErr_Occurred()) {
        Py_DECREF(s);
        return NULL;
    }
    return (PyObject *)s;
}

static PyTypeObject StartType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "ember._speedups.AsgiStart",
    .tp_basicsize = sizeof(Start),
    .tp_dealloc = (destructor)start_dealloc,
    .tp_vectorcall_offset = offsetof(Start, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_traverse = (traverseproc)start_traverse,
    .tp_clear = (inquiry)start_clear,
    .tp_new = start_new,
};

int ember_scope_init(PyObject *m)
{
    struct { PyObject **at; const char *text; } names[] = {
        {&k_method, "method"}, {&k_path, "path"}, {&k_raw_path, "raw_path"}, {&k_query, "query_string"},
        {&k_client, "client"}, {&k_headers, "headers"}, {&k_state, "state"}, {&k_version, "http_version"},
        {&k_receive, "receive"}, {&k_send, "send"}, {&v_10, "1.0"}, {&v_2, "2"}, {&v_11, "1.1"},
        {&k_handle, "handle"}, {&k_body, "body"}, {&k_scope, "scope"},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if ((*names[i].at = PyUnicode_InternFromString(names[i].text)) == NULL)
            return -1;
    for (int i = 0; i < 7; i++)
        if ((method_str[i] = PyUnicode_InternFromString(method_text[i])) == NULL)
            return -1;
    if ((empty = PyBytes_FromStringAndSize("", 0)) == NULL || (no_args = PyTuple_New(0)) == NULL || PyType_Ready(&StartType) < 0)
        return -1;
    Py_INCREF(&StartType);
    return PyModule_AddObject(m, "AsgiStart", (PyObject *)&StartType);
}
