#include "backend/cuda/cublaslt_api.h"

#include <dlfcn.h>

#include <string>

#include "backend/cuda/cuda_check.h"

#define SYV_STR2(x) #x
#define SYV_STR(x) SYV_STR2(x)

namespace syv::cuda {
namespace {

constexpr const char* kLibName = "libcublasLt.so." SYV_STR(CUBLAS_VER_MAJOR);

const char* last_dl_error() {
  const char* e = dlerror();
  return e ? e : "unknown dl error";
}

void* open_library() {
  if (void* lib = dlopen(kLibName, RTLD_NOW | RTLD_LOCAL)) return lib;
  const std::string by_name = last_dl_error();
#ifdef SYV_CUDA_LIB_DIR
  const std::string path = std::string(SYV_CUDA_LIB_DIR) + "/" + kLibName;
  if (void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL)) return lib;
  const std::string message = by_name + "; " + last_dl_error();
#else
  const std::string& message = by_name;
#endif
  cuda_fail(__FILE__, __LINE__, "dlopen(libcublasLt)", message.c_str());
}

CublasLt load() {
  void* lib = open_library();  // kept open for the life of the process
  CublasLt lt;
#define SYV_CUBLASLT_RESOLVE(name)                                  \
  lt.name = reinterpret_cast<decltype(&::name)>(dlsym(lib, #name)); \
  if (lt.name == nullptr) cuda_fail(__FILE__, __LINE__, "dlsym(" #name ")", last_dl_error());
  SYV_CUBLASLT_FUNCTIONS(SYV_CUBLASLT_RESOLVE)
#undef SYV_CUBLASLT_RESOLVE
  return lt;
}

}  // namespace

const CublasLt& cublaslt() {
  static const CublasLt lt = load();
  return lt;
}

}  // namespace syv::cuda
