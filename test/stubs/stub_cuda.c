/* A stand-in libcuda.so.1 for the tests, built by test/CMakeLists.txt into
 * build/test/stub-driver. Its answers are chosen at each call by environment
 * variables (below), so one process can try every case. */
typedef int CUresult;
int cuDriverGetVersion(int* v) {
  *v = 13000;
  return 0;
}
CUresult cuInit(unsigned flags) {
  (void)flags;
  return 0;
}
