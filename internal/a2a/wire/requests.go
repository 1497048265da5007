package wire

import "encoding/json"

// SendMessageRequest is the request of SendMessage and SendStreamingMessage.
type SendMessageRequest struct {
	Tenant        string                    `json:"tenant,omitempty"`
	Message       *Message                  `json:"message"`
	Configuration *SendMessageConfiguration `json:"configuration,omitempty"`
	Metadata      json.RawMessage           `json:"metadata,omitempty"`
}

// SendMessageConfiguration is how a message is to be answered.
type SendMessageConfiguration struct {
	AcceptedOutputModes []string        `json:"acceptedOutputModes,omitempty"`
	PushConfig          json.RawMessage `json:"taskPushNotificationConfig,omitempty"`
	HistoryLength       *int32          `json:"historyLength,omitempty"`
	ReturnImmediately   bool            `json:"returnImmediately,omitempty"`
}

// TaskRequest names one task (GetTask, CancelTask, SubscribeToTask).
type TaskRequest struct {
	Tenant        string          `json:"tenant,omitempty"`
	ID            string          `json:"id"`
	HistoryLength *int32          `json:"historyLength,omitempty"`
	Metadata      json.RawMessage `json:"metadata,omitempty"`
}

// ListTasksRequest is the request of ListTasks.
type ListTasksRequest struct {
	Tenant           string    `json:"tenant,omitempty"`
	ContextID        string    `json:"contextId,omitempty"`
	Status           TaskState `json:"status,omitempty"`
	PageSize         *int32    `json:"pageSize,omitempty"`
	PageToken        string    `json:"pageToken,omitempty"`
	HistoryLength    *int32    `json:"historyLength,omitempty"`
	IncludeArtifacts *bool     `json:"includeArtifacts,omitempty"`
	// StatusTimestampAfter is an RFC 3339 time.
	StatusTimestampAfter string `json:"statusTimestampAfter,omitempty"`
}

// ListTasksResponse is a page of ListTasks.
type ListTasksResponse struct {
	Tasks         []Task `json:"tasks"`
	NextPageToken string `json:"nextPageToken"`
	PageSize      int    `json:"pageSize"`
	TotalSize     int    `json:"totalSize"`
}

// TaskPushNotificationConfig is where a task's push notifications go.
type TaskPushNotificationConfig struct {
	Tenant         string          `json:"tenant,omitempty"`
	ID             string          `json:"id,omitempty"`
	TaskID         string          `json:"taskId"`
	URL            string          `json:"url"`
	Token          string          `json:"token,omitempty"`
	Authentication *map[string]any `json:"authentication,omitempty"`
}

// PushConfigRequest names one config of a task (Get, Delete) or the
// task's configs (List).
type PushConfigRequest struct {
	Tenant    string `json:"tenant,omitempty"`
	TaskID    string `json:"taskId"`
	ID        string `json:"id,omitempty"`
	PageSize  *int32 `json:"pageSize,omitempty"`
	PageToken string `json:"pageToken,omitempty"`
}

// ListPushConfigsResponse is ListTaskPushNotificationConfigs' answer.
type ListPushConfigsResponse struct {
	Configs       []TaskPushNotificationConfig `json:"configs"`
	NextPageToken string                       `json:"nextPageToken"`
}
