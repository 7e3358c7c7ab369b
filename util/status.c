/* Status strings, generated from the one list in status.h. */
#include <causeway/status.h>

#include <stddef.h>

struct status_entry {
    const char *name;
    const char *desc;
};

static const struct status_entry status_table[CW_STATUS_MAX] = {
#define CW_STATUS_ROW_(name, num, desc) [num] = {"CW_" #name, desc},
    CW_STATUS_LIST(CW_STATUS_ROW_)
#undef CW_STATUS_ROW_
};

bool cw_status_valid(int status)
{
    return status >= 0 && status < CW_STATUS_MAX &&
           status_table[status].name != NULL;
}

const char *cw_status_str(cw_status_t status)
{
    if (!cw_status_valid((int)status))
        return "unknown status";
    return status_table[status].desc;
}

const char *cw_status_name(cw_status_t status)
{
    if (!cw_status_valid((int)status))
        return "CW_UNKNOWN";
    return status_table[status].name;
}
