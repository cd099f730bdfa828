# GPU backend: compiled whenever nvcc is found so that CI catches compile errors; its tests skip
# with one clear line when no device exists (engine/comm/README.md). Not in the sanitizer
# build (nvcc objects and ASan do not mix).
set(TPSP_HAVE_CUDA OFF)
if(TPSP_WITH_CUDA AND NOT TPSP_SANITIZE)
  include(CheckLanguage)
  if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    if(NOT CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES 90)  # H100/H200; `native` fails without a GPU
    endif()
    set(CMAKE_CUDA_STANDARD 17)
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    enable_language(CUDA)
    find_package(CUDAToolkit REQUIRED)
    file(GLOB TPSP_CUDA_SOURCES CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/engine/ops/cuda/*.cu
         ${CMAKE_SOURCE_DIR}/engine/ops/cuda/*.cpp ${CMAKE_SOURCE_DIR}/engine/comm/cuda/*.cpp
         ${CMAKE_SOURCE_DIR}/engine/comm/nccl/*.cpp)
    # NCCL ships with the toolkit here but has no CUDA:: target (/work/shared/notes/platform.md).
    find_library(TPSP_NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR} /usr/local/cuda/lib64 REQUIRED)
    find_path(TPSP_NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS} /usr/local/cuda/include REQUIRED)
    add_library(tpsp_cuda STATIC ${TPSP_CUDA_SOURCES})
    target_include_directories(tpsp_cuda PUBLIC ${TPSP_NCCL_INCLUDE_DIR})
    target_link_libraries(tpsp_cuda PUBLIC tpsp_engine CUDA::cudart CUDA::cublas ${TPSP_NCCL_LIBRARY})
    target_compile_options(tpsp_cuda PRIVATE "$<$<COMPILE_LANGUAGE:CUDA>:-Werror=all-warnings>")
    set(TPSP_HAVE_CUDA ON)
  endif()
endif()
message(STATUS "tpsp: GPU backend ${TPSP_HAVE_CUDA}")
