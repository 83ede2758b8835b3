// The image's own library, libvenv.so: it lives only in the image's /opt/venv/lib (or, in the
// image without ENV, a system library directory), as a virtual environment's or conda's
// libraries do. gpucheck is linked to it, so gpucheck starts only where the loader finds it.
const char *venv_hello(void) {
	return "hello from the image's own library";
}
