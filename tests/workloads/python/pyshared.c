/* pyshared.c: the python3.11 command line, but through the shared libpython3.11.so (the
 * interpreter's code and _PyRuntime are in the library, not in the executable).
 * Usage: pyshared SCRIPT ARGS...   Build: cc -I/usr/include/python3.11 ... -lpython3.11 */
#include <Python.h>

int main(int argc, char **argv)
{
	return Py_BytesMain(argc, argv);
}
