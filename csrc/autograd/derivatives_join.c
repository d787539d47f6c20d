/* derivatives_join.c — backward formulas of joins, splits and rearrangements (ops/join.c). */
#include "formula.h"

static const EmFormula formulas[] = {
    {0, 0, NULL, NULL, NULL}, /* placeholder: the table is filled as formulas land */
};

void em_formulas_join(void) {
    for (size_t i = 0; i < sizeof formulas / sizeof formulas[0]; i++)
        if (formulas[i].fn) em_formulas_add(&formulas[i], 1);
}
