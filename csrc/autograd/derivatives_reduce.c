/* derivatives_reduce.c — backward formulas of reductions, scans and selections (ops/reduce.c, ops/sort.c). */
#include "formula.h"

static const EmFormula formulas[] = {
    {0, 0, NULL, NULL, NULL}, /* placeholder: the table is filled as formulas land */
};

void em_formulas_reduce(void) {
    for (size_t i = 0; i < sizeof formulas / sizeof formulas[0]; i++)
        if (formulas[i].fn) em_formulas_add(&formulas[i], 1);
}
