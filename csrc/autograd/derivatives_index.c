/* derivatives_index.c — backward formulas of the index ops and advanced indexing (ops/index*.c, ops/scatter_gather.c). */
#include "formula.h"

static const EmFormula formulas[] = {
    {0, 0, NULL, NULL, NULL}, /* placeholder: the table is filled as formulas land */
};

void em_formulas_index(void) {
    for (size_t i = 0; i < sizeof formulas / sizeof formulas[0]; i++)
        if (formulas[i].fn) em_formulas_add(&formulas[i], 1);
}
