"""ctypes, inert: bound by the execcritic sandbox over the standard library's `ctypes/__init__.py` (the native
`_ctypes` is hidden). Importing it works - Django's test runner and pandas import ctypes at module level - but
nothing here reaches native memory or calls C: the code under test must not read or write the memory of the
process that computes its verdict. Every operation that would raises OSError (`CtypesUnavailable`); the type names
exist so that definitions made at import time (subclasses, `ctypes.c_int` as a value) still work."""
_WHY = "ctypes is not available to the code under test (execcritic sandbox: no foreign-function interface)"


class CtypesUnavailable(OSError):
    """What every refusal raises. Its repr ends the line it is written on: a library that reports a failed ctypes
    setup on stderr without a newline (tblib on Python 3.6, imported by Django's test runner: "Failed to initialize
    cpython support: {!r}") would otherwise glue the next line of the test log to it - a result line, lost to
    SWE-bench's log parser (measured: django__django-13810's plain run, a P2P test with no result). SWE-bench's
    images have a working ctypes, so the message is the sandbox's and must not cost a result."""

    def __repr__(self):
        return OSError.__repr__(self) + "\n"


def _refuse(*args, **kwargs):
    # told to the harness's reporter, where one runs in this process: tampering when the candidate's code is
    # on the stack (the standard library tries ctypes and copes without it: uuid, Django's runner)
    audit = getattr(__import__("sys"), "audit", None)
    if audit is not None:
        audit("execcritic.reporter", "ffi")
    raise CtypesUnavailable(_WHY)


class ArgumentError(Exception):
    pass


class _CData(object):
    def __init__(self, *args, **kwargs):
        _refuse()

    @classmethod
    def from_address(cls, *args):
        _refuse()

    from_buffer = from_buffer_copy = in_dll = from_param = from_address


class _SimpleCData(_CData):
    pass


class Structure(_CData):
    pass


class Union(_CData):
    pass


class Array(_CData):
    pass


class _Pointer(_CData):
    pass


class _CFuncPtr(_CData):
    pass


BigEndianStructure = LittleEndianStructure = Structure
for _name in ("c_bool", "c_byte", "c_char", "c_char_p", "c_double", "c_float", "c_int", "c_int16", "c_int32",
              "c_int64", "c_int8", "c_long", "c_longdouble", "c_longlong", "c_short", "c_size_t", "c_ssize_t",
              "c_ubyte", "c_uint", "c_uint16", "c_uint32", "c_uint64", "c_uint8", "c_ulong", "c_ulonglong",
              "c_ushort", "c_void_p", "c_wchar", "c_wchar_p", "py_object", "c_time_t"):
    globals()[_name] = type(_name, (_SimpleCData,), {"__module__": __name__})
c_voidp = c_void_p          # noqa: F821 (made above)

RTLD_GLOBAL, RTLD_LOCAL, DEFAULT_MODE = 256, 0, 0
_FUNCFLAG_CDECL, _FUNCFLAG_PYTHONAPI, _FUNCFLAG_USE_ERRNO, _FUNCFLAG_USE_LASTERROR = 1, 4, 8, 16
__version__ = "1.1.0"


class CDLL(object):
    def __init__(self, *args, **kwargs):
        _refuse()


PyDLL = CDLL


class LibraryLoader(object):
    def __init__(self, dlltype):
        self._dlltype = dlltype

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        _refuse()

    __getitem__ = LoadLibrary = __getattr__


cdll, pydll = LibraryLoader(CDLL), LibraryLoader(PyDLL)


class _Refused(object):
    def __getattr__(self, name):
        _refuse()


pythonapi = _Refused()
(POINTER, pointer, CFUNCTYPE, PYFUNCTYPE, SetPointerType, ARRAY, addressof, alignment, byref, cast,
 create_string_buffer, create_unicode_buffer, c_buffer, memmove, memset, resize, sizeof, string_at, wstring_at,
 get_errno, set_errno) = (_refuse,) * 21
del _name
