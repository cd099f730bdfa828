// Every op of the engine, on any device: each is a forward and a backward plain function (llm.c style).
#pragma once

#include "engine/ops/adamw.h"
#include "engine/ops/attention.h"
#include "engine/ops/cross_entropy.h"
#include "engine/ops/dropout.h"
#include "engine/ops/elementwise.h"
#include "engine/ops/embedding.h"
#include "engine/ops/layernorm.h"
#include "engine/ops/matmul.h"
#include "engine/ops/rmsnorm.h"
#include "engine/ops/rope.h"
#include "engine/ops/softmax.h"
#include "engine/ops/swiglu.h"
