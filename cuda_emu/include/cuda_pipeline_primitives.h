/* The primitives alone, as CUDA splits them: the same as cuda_pipeline.h here. */
#include "cuda_pipeline.h"
