/* label_names.h: the names of the labels prowl itself writes, each spelled once: the
 * series labels every series carries and the sample labels of every profile. */
#ifndef PROWL_LABEL_NAMES_H
#define PROWL_LABEL_NAMES_H

/* Series labels (discovery, then relabel_configs). */
#define LABEL_SERVICE_NAME "service_name"
#define LABEL_HOST_NAME    "host_name"
#define LABEL_CONTAINER_ID "container_id" /* outside pods, or a container the API server cannot name */

/* Sample labels (each sample's label set in the profile). */
#define LABEL_PID          "pid"
#define LABEL_PROCESS_NAME "process_name"
#define LABEL_TID          "tid"
#define LABEL_THREAD_NAME  "thread_name"

#endif
