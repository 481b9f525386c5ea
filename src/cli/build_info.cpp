#include "cli/build_info.h"

namespace syv::cli {

const BuildInfo& build_info() {
  static const BuildInfo info{"0.1.0", kGitCommit, SYV_BUILD_TYPE, SYV_BUILD_COMPILER,
                              SYV_BUILD_CUDA};
  return info;
}

}  // namespace syv::cli
