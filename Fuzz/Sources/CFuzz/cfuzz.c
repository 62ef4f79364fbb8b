#include "CFuzz.h"
