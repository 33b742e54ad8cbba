#pragma once
#define MODEL_CONFIG 1
